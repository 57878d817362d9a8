// StepStats: the facts of one engine step (its batch's shape and where its time went) that the
// Engine hands to a StepObserver after the step. What they mean to Prometheus is the server's
// business: the engine counts and times, it never records metrics.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/executor.h"
#include "engine/scheduled_batch.h"
#include "engine/step_cost_model.h"

namespace lm {

struct StepStats {
  int64_t num_sequences = 0;  // entries in the batch
  int64_t num_admitted = 0;   // of them, taken from the queue this step (ScheduledBatch)
  // Tokens of entries with more than their newest token to compute (a prompt chunk, or a
  // preempted sequence's recompute), and of entries computing just their newest token.
  int64_t num_prefill_tokens = 0;
  int64_t num_decode_tokens = 0;
  int64_t num_samples = 0;  // entries that sampled a token
  // Speculative decoding: proposals the step verified (rows beside the tokens counted above),
  // and per sampling entry, in batch order, the proposals it accepted (StepOutput's).
  int64_t num_proposed_tokens = 0;
  std::vector<int64_t> num_accepted;
  std::vector<int64_t> num_proposed;  // per sampling entry too: the proposals it verified
  // Per request that ended this step (length, EOS or a stop sequence; not cancelled or failed)
  // when the engine speculates: its proposals verified and accepted over its life.
  std::vector<RequestSpeculation> finished_speculation;
  // Key positions the step's tokens attend to (StepShape), for the step cost model.
  int64_t num_attended_tokens = 0;
  bool failed = false;  // the executor failed, and with it every sequence of the batch
  // Seconds: Executor::execute as a whole and as the executor split it, Scheduler::update
  // (finish rules, blocks freed) and the delivery of tokens to sinks (stopped ones removed).
  double execute_seconds = 0;
  ExecuteTimings executor;
  double update_seconds = 0;
  double deliver_seconds = 0;
  // The whole step, from scheduling to the last token delivered: what a running stream waits
  // between two tokens, and what the step cost model is fitted to.
  double step_seconds = 0;

  // Proposals push rows through the weights as a prompt chunk's tokens do.
  StepShape shape() const {
    return {.num_prefill_tokens = num_prefill_tokens + num_proposed_tokens,
            .num_decode_rows = num_decode_tokens,
            .num_attended_tokens = num_attended_tokens};
  }
  // "prefill" (only prompt chunks), "decode" (only newest tokens) or "mixed".
  const char* kind() const;
};

// The counts of a batch; call it before Scheduler::update advances its sequences. Attended
// positions are capped at kv_window_tokens when it is > 0 (EngineConfig's).
StepStats count_step(const ScheduledBatch& batch, int64_t kv_window_tokens = 0);

// Called on the engine thread after every step that computed a batch; must not call the Engine.
using StepObserver = std::function<void(const StepStats&)>;

}  // namespace lm
