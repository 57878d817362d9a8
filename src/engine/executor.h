// Executor: the interface the engine drives to compute a step. The runtime implements it over the
// model (runtime/model_executor.h); engine tests use a fake. Only the engine thread calls execute
// and release.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "engine/engine_request.h"
#include "engine/sampled_token.h"
#include "engine/scheduled_batch.h"

namespace lm {

// Where the last execute() spent its time, in seconds; 0 for what an executor does not measure.
struct ExecuteTimings {
  double prepare_seconds = 0;  // the batch turned into flat inputs
  double forward_seconds = 0;  // the model's forward over every scheduled token
  double sample_seconds = 0;   // logits to tokens
};

class Executor {
 public:
  virtual ~Executor() = default;

  // Rejects a request this executor can never run (ids outside the vocabulary, longer than the
  // model's context). Called by Engine::submit on the submitting thread, so it must be const-safe.
  virtual Status check_request(const EngineRequest& request) const = 0;

  // Computes the batch: for every entry, the K/V of its tokens (and proposals) at their
  // positions; for every entry with `samples`, in batch order, the token chosen at its last known
  // token's row, then, while the token just chosen equals the next proposal, the token chosen at
  // that proposal's row. Each row is chosen as if it were the only one: the sequence's sampler
  // has seen the tokens before it, so greedy and seeded choices are those of plain decoding.
  // Sequences seen for the first time get their per-sequence state (the sampler) here.
  virtual Result<std::vector<SampleResult>> execute(const ScheduledBatch& batch) = 0;

  // The sequence left the engine (finished, stopped, cancelled, failed): free its state. May name
  // a sequence the executor never saw (it was removed while waiting).
  virtual void release(int64_t seq_id) = 0;

  // These blocks' K/V will never be read again before they are written: their memory may go back
  // to the OS (BlockManager::take_returned_blocks). Never called with a block a batch uses.
  virtual void return_blocks(const std::vector<int32_t>& block_ids) { (void)block_ids; }

  // How the last execute() spent its time (for the engine's StepStats).
  virtual ExecuteTimings last_timings() const { return {}; }
};

}  // namespace lm
