// StepInputs: a ScheduledBatch turned into the flat varlen arrays one batched forward reads
// (token ids, positions, slot mapping, query ranges, padded block tables, sampling rows).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/scheduled_batch.h"
#include "model/batch_input.h"

namespace lm {

class StepInputs {
 public:
  // Rebuilds every array for `batch` (reusing their memory); checks each block table covers its
  // sequence's positions with blocks in [1, num_blocks), but for its leading placeholders
  // (block 0: released blocks wholly before the sliding window, which attention never reads).
  void build(const ScheduledBatch& batch, int64_t block_size, int64_t num_blocks);
  // Views of the arrays, valid until the next build.
  BatchInput view() const;
  // Per batch entry: how many logits rows before its sampling rows (if any) are prompt rows, for
  // positions first_position, first_position + 1, ... (a prompt_logprobs request before its first
  // token: the row at position p scores prompt token p + 1). Logits rows come entry by entry.
  const std::vector<int64_t>& num_prompt_rows() const { return num_prompt_rows_; }

 private:
  std::vector<int32_t> token_ids_;     // [num_tokens]
  std::vector<int32_t> positions_;     // [num_tokens]
  std::vector<int64_t> slot_mapping_;  // [num_tokens]
  std::vector<int32_t> query_begins_;  // [num_seqs + 1]
  std::vector<int32_t> block_tables_;  // [num_seqs, max_blocks_per_seq_], padded with block 0
  int64_t max_blocks_per_seq_ = 0;
  std::vector<int32_t> logit_rows_;       // per entry: its prompt rows, then its sampling rows
  std::vector<int64_t> num_prompt_rows_;  // [num_seqs]
  std::vector<int32_t> rope_lengths_;     // [num_seqs]: max(prompt length, last position + 1)
};

}  // namespace lm
