// Element types of weights and activations, including GGML block-quantized formats. A
// quantized row of k elements is k / block_size blocks of block_bytes each.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace lm {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kQ2_K,
  kQ3_K,
  kIQ4_NL,
  kIQ4_XS,
  kI32,
  kI8,       // quantized checkpoints' integer tensors (compressed-tensors' int8 weights)
  kI64,      // compressed-tensors' weight_shape
  kF8_E4M3,  // the KV cache's FP8 formats (--kv-cache-dtype)
  kF8_E5M2,
  kNF4,  // bitsandbytes' 4-bit formats (--quantize bitsandbytes-nf4 / -fp4 at load)
  kFP4,
  kQ4_Z128  // ours: pre-quantized 4-bit groups of 128 with zero points
            // (kernels/cpu/q4_z128_blocks.h)
};

struct DTypeInfo {
  std::string_view name;
  int64_t block_size;   // elements per block (1 for plain types)
  int64_t block_bytes;  // bytes per block
};

const DTypeInfo& dtype_info(DType dtype);
inline std::string_view dtype_name(DType dtype) { return dtype_info(dtype).name; }
inline bool is_quantized(DType dtype) { return dtype_info(dtype).block_size > 1; }
inline bool is_fp8(DType dtype) { return dtype == DType::kF8_E4M3 || dtype == DType::kF8_E5M2; }

// Bytes of `num_elements` elements, or nullopt when num_elements is not a whole number of blocks
// or the byte count overflows.
std::optional<uint64_t> dtype_bytes(DType dtype, uint64_t num_elements);

}  // namespace lm
