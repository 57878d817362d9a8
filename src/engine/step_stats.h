// StepStats: the facts of one engine step (its batch's shape and where its time went) that the
// Engine hands to a StepObserver after the step. What they mean to Prometheus is the server's
// business: the engine counts and times, it never records metrics.
#pragma once

#include <cstdint>
#include <functional>

#include "engine/executor.h"
#include "engine/scheduled_batch.h"

namespace lm {

struct StepStats {
  int64_t num_sequences = 0;  // entries in the batch
  int64_t num_admitted = 0;   // of them, taken from the queue this step (ScheduledBatch)
  // Tokens of entries with more than their newest token to compute (a prompt chunk, or a
  // preempted sequence's recompute), and of entries computing just their newest token.
  int64_t num_prefill_tokens = 0;
  int64_t num_decode_tokens = 0;
  int64_t num_samples = 0;  // entries that sampled a token
  bool failed = false;      // the executor failed, and with it every sequence of the batch
  // Seconds: Executor::execute as a whole and as the executor split it, Scheduler::update
  // (finish rules, blocks freed) and the delivery of tokens to sinks (stopped ones removed).
  double execute_seconds = 0;
  ExecuteTimings executor;
  double update_seconds = 0;
  double deliver_seconds = 0;
};

// The counts of a batch; call it before Scheduler::update advances its sequences.
StepStats count_step(const ScheduledBatch& batch);

// Called on the engine thread after every step that computed a batch; must not call the Engine.
using StepObserver = std::function<void(const StepStats&)>;

}  // namespace lm
