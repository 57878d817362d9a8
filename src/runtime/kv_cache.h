// Contiguous K/V memory for one sequence: per layer [capacity, num_kv_heads * head_dim] fp32 for
// keys and values. Used by the single-sequence Generator and warm-up; the engine's sequences
// share the paged KvPool instead.
#pragma once

#include <vector>

#include "model/llama_model.h"
#include "model/model_config.h"
#include "tensor/tensor.h"

namespace lm {

class SequenceKvCache {
 public:
  SequenceKvCache(const ModelConfig& config, int64_t capacity);
  SequenceKvCache(const SequenceKvCache&) = delete;
  SequenceKvCache& operator=(const SequenceKvCache&) = delete;

  KvCacheView& view() { return view_; }
  int64_t capacity() const { return view_.capacity(); }

 private:
  std::vector<Buffer> keys_;
  std::vector<Buffer> values_;
  KvCacheView view_;
};

}  // namespace lm
