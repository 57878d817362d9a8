// ScheduledBatch: what one engine step computes, as the Scheduler decides and the Executor runs
// it. Each entry names a sequence and a contiguous run of its tokens at their positions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/check.h"
#include "engine/sequence.h"

namespace lm {

struct ScheduledSequence {
  const Sequence* sequence = nullptr;  // valid until Scheduler::update
  int64_t seq_id = 0;
  // = the sequence's num_computed_tokens before the step: > 0 on admission after a prefix cache
  // hit, 0 again when a preempted sequence is recomputed.
  int64_t first_position = 0;
  int64_t num_tokens = 0;  // of the sequence's known tokens, those computed this step
  // True when the step reaches the end of the sequence's known tokens, so the executor samples
  // the next one from the last token's logits.
  bool samples = false;
  // Physical KV blocks covering positions [0, first_position + num_query_tokens()): position p's
  // K/V lives in slot block_table[p / block_size] * block_size + p % block_size.
  std::vector<int32_t> block_table;
  // Its leading entries that are placeholders (block 0) for released blocks: they lie wholly
  // before the sliding window of every position this step computes, so attention never reads
  // them (EngineConfig::kv_window_tokens).
  int64_t num_placeholder_blocks = 0;
  // Speculative decoding (only with `samples`): tokens guessed to follow the known ones, computed
  // this step too at the positions after them. The executor samples at the last known token's
  // row, and at each proposal's row while the token it just chose equals that proposal
  // (Executor::execute); K/V written for a rejected proposal is never read.
  std::vector<int32_t> proposed_ids = {};

  // Rows this entry puts through the model: its known tokens and its proposals.
  int64_t num_query_tokens() const {
    return num_tokens + static_cast<int64_t>(proposed_ids.size());
  }

  // Its known tokens computed this step (the proposals follow them).
  std::span<const int32_t> token_ids() const {
    LM_CHECK(first_position + num_tokens <= sequence->num_tokens());
    return std::span<const int32_t>(sequence->token_ids)
        .subspan(static_cast<size_t>(first_position), static_cast<size_t>(num_tokens));
  }
};

struct ScheduledBatch {
  std::vector<ScheduledSequence> sequences;  // running sequences first, in admission order
  // The last num_admitted entries left the queue this step (TGI's "next batch"); the others were
  // running before it.
  int64_t num_admitted = 0;

  bool empty() const { return sequences.empty(); }
  // Rows of the step's forward: known tokens and proposals.
  int64_t num_tokens() const {
    int64_t n = 0;
    for (const ScheduledSequence& s : sequences) n += s.num_query_tokens();
    return n;
  }
  int64_t num_proposed_tokens() const {
    int64_t n = 0;
    for (const ScheduledSequence& s : sequences) n += static_cast<int64_t>(s.proposed_ids.size());
    return n;
  }
  int64_t num_samples() const {
    int64_t n = 0;
    for (const ScheduledSequence& s : sequences) n += s.samples ? 1 : 0;
    return n;
  }
};

}  // namespace lm
