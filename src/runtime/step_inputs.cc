#include "runtime/step_inputs.h"

#include <algorithm>

#include "base/check.h"

namespace lm {

void StepInputs::build(const ScheduledBatch& batch, int64_t block_size, int64_t num_blocks) {
  token_ids_.clear();
  positions_.clear();
  slot_mapping_.clear();
  query_begins_.assign(1, 0);
  block_tables_.clear();
  logit_rows_.clear();
  num_prompt_rows_.clear();
  rope_lengths_.clear();
  max_blocks_per_seq_ = 0;
  for (const ScheduledSequence& entry : batch.sequences) {
    const int64_t end = entry.first_position + entry.num_query_tokens();
    max_blocks_per_seq_ = std::max(max_blocks_per_seq_, (end + block_size - 1) / block_size);
  }
  for (const ScheduledSequence& entry : batch.sequences) {
    LM_CHECK(entry.num_tokens > 0 && entry.first_position >= 0);
    LM_CHECK(entry.samples || entry.proposed_ids.empty());
    // Proposals are rows like the known tokens, at the positions after them.
    const int64_t end = entry.first_position + entry.num_query_tokens();
    const int64_t num_used_blocks = (end + block_size - 1) / block_size;
    LM_CHECK(static_cast<int64_t>(entry.block_table.size()) >= num_used_blocks);
    // Placeholders (block 0) stand for released blocks before the window; the positions this
    // step writes lie after them.
    LM_CHECK(entry.num_placeholder_blocks >= 0 &&
             entry.num_placeholder_blocks <= entry.first_position / block_size);
    for (int64_t i = 0; i < num_used_blocks; ++i) {
      const int32_t block = entry.block_table[static_cast<size_t>(i)];
      LM_CHECK(i < entry.num_placeholder_blocks ? block == 0 : (block > 0 && block < num_blocks));
      block_tables_.push_back(block);
    }
    block_tables_.resize(block_tables_.size() +
                         static_cast<size_t>(max_blocks_per_seq_ - num_used_blocks));
    const std::span<const int32_t> ids = entry.token_ids();
    token_ids_.insert(token_ids_.end(), ids.begin(), ids.end());
    token_ids_.insert(token_ids_.end(), entry.proposed_ids.begin(), entry.proposed_ids.end());
    for (int64_t p = entry.first_position; p < end; ++p) {
      positions_.push_back(static_cast<int32_t>(p));
      slot_mapping_.push_back(entry.block_table[static_cast<size_t>(p / block_size)] * block_size +
                              p % block_size);
    }
    const int32_t begin = query_begins_.back();
    query_begins_.push_back(static_cast<int32_t>(token_ids_.size()));
    const Sequence& seq = *entry.sequence;
    int64_t prompt_rows = 0;
    if (seq.wants_prompt_logits()) {
      // Positions up to the prompt's second to last: the last one's row is the sampling row.
      prompt_rows =
          std::max<int64_t>(0, std::min(end, seq.num_prompt_tokens - 1) - entry.first_position);
      for (int64_t r = 0; r < prompt_rows; ++r)
        logit_rows_.push_back(begin + static_cast<int32_t>(r));
    }
    num_prompt_rows_.push_back(prompt_rows);
    rope_lengths_.push_back(static_cast<int32_t>(std::max(end, seq.num_prompt_tokens)));
    // The sampling rows: the last known token's, then each proposal's.
    if (entry.samples) {
      for (int32_t row = begin + static_cast<int32_t>(entry.num_tokens) - 1;
           row < query_begins_.back(); ++row)
        logit_rows_.push_back(row);
    }
  }
}

BatchInput StepInputs::view() const {
  return BatchInput{.token_ids = token_ids_,
                    .positions = positions_,
                    .slot_mapping = slot_mapping_,
                    .query_begins = query_begins_,
                    .block_tables = block_tables_,
                    .max_blocks_per_seq = max_blocks_per_seq_,
                    .logit_rows = logit_rows_,
                    .rope_lengths = rope_lengths_};
}

}  // namespace lm
