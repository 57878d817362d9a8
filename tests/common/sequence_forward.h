// SequenceForward: one sequence through LlamaModel::forward_batch over a KvPool of its own
// (blocks 1, 2, ... in order), a prompt at once or token by token. The model tests' way to read a
// lone sequence's logits from the one forward the engine runs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/check.h"
#include "base/thread_pool.h"
#include "model/batch_input.h"
#include "model/llama_model.h"
#include "runtime/kv_pool.h"

namespace lm {

class SequenceForward {
 public:
  static constexpr int64_t kBlockSize = 16;

  // K/V room for `capacity` positions, in kv_dtype.
  SequenceForward(LlamaModel& model, int64_t capacity, DType kv_dtype = DType::kF32)
      : model_(model),
        kv_(model.config(), (capacity + kBlockSize - 1) / kBlockSize + 1, kBlockSize, kv_dtype) {}

  // Runs `ids` at the positions after those already run. Returns logits [1, vocab_size] for the
  // last token, or [ids.size(), vocab_size] for every token when all_logits.
  std::vector<float> run(std::span<const int32_t> ids, bool all_logits, ThreadPool& pool) {
    const auto n = static_cast<int64_t>(ids.size());
    const int64_t end = num_computed_ + n;
    const int64_t num_blocks = (end + kBlockSize - 1) / kBlockSize;
    LM_CHECK(n > 0 && num_blocks < kv_.num_blocks());
    std::vector<int32_t> positions, block_table, logit_rows;
    std::vector<int64_t> slots;
    for (int64_t b = 0; b < num_blocks; ++b) block_table.push_back(static_cast<int32_t>(b + 1));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = num_computed_ + i;
      positions.push_back(static_cast<int32_t>(p));
      slots.push_back(block_table[static_cast<size_t>(p / kBlockSize)] * kBlockSize +
                      p % kBlockSize);
      if (all_logits || i == n - 1) logit_rows.push_back(static_cast<int32_t>(i));
    }
    const int32_t query_begins[] = {0, static_cast<int32_t>(n)};
    const BatchInput batch{.token_ids = ids,
                           .positions = positions,
                           .slot_mapping = slots,
                           .query_begins = query_begins,
                           .block_tables = block_table,
                           .max_blocks_per_seq = num_blocks,
                           .logit_rows = logit_rows,
                           .rope_lengths = {}};
    std::vector<float> logits;
    model_.forward_batch(batch, kv_.view(), logits, pool);
    num_computed_ = end;
    return logits;
  }

 private:
  LlamaModel& model_;
  KvPool kv_;
  int64_t num_computed_ = 0;
};

}  // namespace lm
