#include "engine/step_stats.h"

namespace lm {

StepStats count_step(const ScheduledBatch& batch, int64_t kv_window_tokens) {
  StepStats stats;
  stats.num_sequences = static_cast<int64_t>(batch.sequences.size());
  stats.num_admitted = batch.num_admitted;
  StepShape shape{.window = kv_window_tokens};
  for (const ScheduledSequence& entry : batch.sequences) {
    // The scheduler's own rule, read before update moves num_computed_tokens.
    shape.add(entry.first_position, entry.num_tokens, entry.sequence->needs_prefill());
  }
  stats.num_prefill_tokens = shape.num_prefill_tokens;
  stats.num_decode_tokens = shape.num_decode_rows;
  for (const ScheduledSequence& entry : batch.sequences) {
    // Proposals sit after the entry's known tokens and attend as a chunk's tokens do.
    shape.add(entry.first_position + entry.num_tokens,
              static_cast<int64_t>(entry.proposed_ids.size()), /*prefill=*/true);
  }
  stats.num_attended_tokens = shape.num_attended_tokens;
  stats.num_samples = batch.num_samples();
  stats.num_proposed_tokens = batch.num_proposed_tokens();
  return stats;
}

const char* StepStats::kind() const {
  if (num_prefill_tokens > 0 && num_decode_tokens > 0) return "mixed";
  return num_prefill_tokens > 0 ? "prefill" : "decode";
}

}  // namespace lm
