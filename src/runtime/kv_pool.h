// KvPool: the K/V memory of every running sequence, one pool of fixed-size blocks shared by all
// of them (the BlockManager in the engine decides which blocks a sequence owns). Block 0 is
// reserved: never handed to a sequence, it pads block tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/batch_input.h"
#include "model/model_config.h"
#include "tensor/tensor.h"

namespace lm {

// The KV cache dtype --kv-cache-dtype names: TGI's fp8_e4m3fn and fp8_e5m2, vLLM's fp8 (E4M3)
// and fp8_e4m3, and fp16/float16, bf16/bfloat16, fp32/float32; nullopt for anything else.
std::optional<DType> parse_kv_cache_dtype(std::string_view name);
// The dtype when none is named: fp16 (llama.cpp's default cache) where the model computes as
// llama.cpp does (int8 activations over block-quantized weights), fp32 where it computes as
// transformers does in fp32 (float weights, or int8 activations off), which a rounding cache
// would no longer match.
DType default_kv_cache_dtype(bool int8_activation_dots);
// The cache dtype a start uses: `name` (checked with parse_kv_cache_dtype first) or, unset,
// default_kv_cache_dtype of whether int8 activations apply (on, over block-quantized weights).
DType resolve_kv_cache_dtype(const std::optional<std::string>& name, bool int8_activations,
                             bool quantized_weights);
// What --kv-cache-dtype accepts, for the error that refuses anything else.
inline constexpr std::string_view kKvCacheDtypeChoices =
    "fp8_e4m3fn, fp8_e5m2, fp8, fp16, bf16 or fp32";
// The name logs and the start plan print (the dtype's TGI spelling).
std::string_view kv_cache_dtype_name(DType dtype);

class KvPool {
 public:
  // Per layer [num_blocks, block_size, num_key_value_heads, head_dim] keys and values in `dtype`
  // (F32, F16, BF16, F8_E4M3 or F8_E5M2: kernels/cpu/kv_format.h says how each is written).
  KvPool(const ModelConfig& config, int64_t num_blocks, int64_t block_size,
         DType dtype = DType::kF32);
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  // K and V bytes one token takes over all layers (how the launcher sizes the pool).
  static int64_t bytes_per_token(const ModelConfig& config, DType dtype);

  // Hands the memory of these blocks back to the OS in every layer (the whole pages inside each
  // block's K and V rows): they read as zeros until written again. Resident memory then follows
  // the blocks in use (BlockManager::take_returned_blocks).
  void return_pages(const std::vector<int32_t>& block_ids);
  // Bytes of one block over all layers, K and V.
  int64_t bytes_per_block() const;

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  DType dtype() const { return dtype_; }
  PagedKvView& view() { return view_; }

 private:
  int64_t num_blocks_;
  int64_t block_size_;
  DType dtype_;
  std::vector<Buffer> keys_;
  std::vector<Buffer> values_;
  PagedKvView view_;
};

}  // namespace lm
