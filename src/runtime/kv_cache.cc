#include "runtime/kv_cache.h"

namespace lm {

SequenceKvCache::SequenceKvCache(const ModelConfig& config, int64_t capacity) {
  LM_CHECK(capacity > 0);
  const int64_t kv_dim = config.num_key_value_heads * config.head_dim;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    keys_.emplace_back(Shape{capacity, kv_dim});
    values_.emplace_back(Shape{capacity, kv_dim});
    view_.k.push_back(keys_.back().view());
    view_.v.push_back(values_.back().view());
  }
}

}  // namespace lm
