// Proposer: where a decoding sequence's speculative proposals come from. The scheduler sizes
// each sequence's proposals (speculate, its acceptance, free blocks, the step's latency target),
// asks once per step for all of them, and the step's forward verifies what comes back. The
// engine's own is prompt lookup (NgramProposer); the runtime's runs a draft model
// (runtime/draft_proposer.h). Called on the engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lm {

struct ProposalSlot {
  int64_t seq_id = 0;
  // The sequence's prompt and generated ids; the last one's K/V is computed by this step.
  std::span<const int32_t> token_ids;
  int64_t max_tokens = 0;  // >= 1
  // Out: at most max_tokens ids proposed to follow token_ids (none is fine).
  std::vector<int32_t> proposed;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Fills every slot's `proposed`; one call per step, every decoding sequence that may propose.
  virtual void propose(std::span<ProposalSlot> slots) = 0;
  // The sequence left the engine: whatever the proposer keeps for it can go. May name one it
  // never saw. (A preempted sequence is not released: it comes back with the same ids.)
  virtual void release(int64_t seq_id) { (void)seq_id; }
  // Words for the start log ("n-gram", "draft model ...").
  virtual const char* kind() const = 0;
  // Whether a step of proposals costs about the same whenever it comes. False for a draft
  // model: after steps without proposals it first catches up on the tokens it missed (a
  // prompt's worth, at the start of a request), so trying speculation again costs far more than
  // a step (SpeculationGovernor then stops probing it once it has lost).
  virtual bool cheap_to_resume() const { return true; }
  // Rows the last propose() computed only to catch up (0 where nothing is computed): a step
  // that caught up on more than it proposed is a transition, not speculation's steady cost.
  virtual int64_t last_catch_up_rows() const { return 0; }
  // The seconds those rows took (their share of the forward that computed them).
  virtual double last_catch_up_seconds() const { return 0; }
  // Rows a propose() for this sequence now would compute only to catch up on `token_ids` (a
  // draft model: its whole prompt the first time). The scheduler leaves a sequence out whose
  // catch-up its remaining tokens would not pay back (SpeculationGovernor::catch_up_pays).
  virtual int64_t catch_up_rows(int64_t seq_id, std::span<const int32_t> token_ids) const {
    (void)seq_id;
    (void)token_ids;
    return 0;
  }
};

}  // namespace lm
