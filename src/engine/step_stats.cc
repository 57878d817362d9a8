#include "engine/step_stats.h"

namespace lm {

StepStats count_step(const ScheduledBatch& batch) {
  StepStats stats;
  stats.num_sequences = static_cast<int64_t>(batch.sequences.size());
  stats.num_admitted = batch.num_admitted;
  for (const ScheduledSequence& entry : batch.sequences) {
    // The scheduler's own rule, read before update moves num_computed_tokens.
    (entry.sequence->needs_prefill() ? stats.num_prefill_tokens : stats.num_decode_tokens) +=
        entry.num_tokens;
  }
  stats.num_samples = batch.num_samples();
  return stats;
}

}  // namespace lm
