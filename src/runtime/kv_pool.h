// KvPool: the K/V memory of every running sequence, one pool of fixed-size blocks shared by all
// of them (the BlockManager in the engine decides which blocks a sequence owns). Block 0 is
// reserved: never handed to a sequence, it pads block tables.
#pragma once

#include <cstdint>
#include <vector>

#include "model/batch_input.h"
#include "model/model_config.h"
#include "tensor/tensor.h"

namespace lm {

class KvPool {
 public:
  // Per layer [num_blocks, block_size, num_key_value_heads, head_dim] fp32 keys and values.
  KvPool(const ModelConfig& config, int64_t num_blocks, int64_t block_size);
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  // K and V bytes one token takes over all layers (how the launcher sizes the pool).
  static int64_t bytes_per_token(const ModelConfig& config);

  // Hands the memory of these blocks back to the OS in every layer (the whole pages inside each
  // block's K and V rows): they read as zeros until written again. Resident memory then follows
  // the blocks in use (BlockManager::take_returned_blocks).
  void return_pages(const std::vector<int32_t>& block_ids);
  // Bytes of one block over all layers, K and V.
  int64_t bytes_per_block() const;

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  PagedKvView& view() { return view_; }

 private:
  int64_t num_blocks_;
  int64_t block_size_;
  std::vector<Buffer> keys_;
  std::vector<Buffer> values_;
  PagedKvView view_;
};

}  // namespace lm
