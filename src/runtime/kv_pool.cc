#include "runtime/kv_pool.h"

#include "base/check.h"

namespace lm {

KvPool::KvPool(const ModelConfig& config, int64_t num_blocks, int64_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  LM_CHECK(num_blocks >= 2 && block_size >= 1);  // block 0 is reserved
  const Shape shape{num_blocks, block_size, config.num_key_value_heads, config.head_dim};
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    keys_.emplace_back(shape);
    values_.emplace_back(shape);
    view_.k.push_back(keys_.back().view());
    view_.v.push_back(values_.back().view());
  }
}

int64_t KvPool::bytes_per_token(const ModelConfig& config) {
  return config.num_hidden_layers * 2 * config.num_key_value_heads * config.head_dim *
         static_cast<int64_t>(sizeof(float));
}

}  // namespace lm
