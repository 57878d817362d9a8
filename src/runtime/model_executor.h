// ModelExecutor: the engine's Executor over a LlamaModel on the CPU. Owns each running sequence's
// K/V cache and Sampler, created when the sequence is first scheduled and freed on release.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/executor.h"
#include "model/llama_model.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"

namespace lm {

class ModelExecutor final : public Executor {
 public:
  // `model` and `pool` must outlive the executor; while an Engine drives it, only the engine
  // thread may use them.
  ModelExecutor(LlamaModel& model, ThreadPool& pool) : model_(model), pool_(pool) {}

  Status check_request(const EngineRequest& request) const override;
  Result<std::vector<SampleResult>> execute(const ScheduledBatch& batch) override;
  void release(int64_t seq_id) override;

  int64_t num_sequences() const { return static_cast<int64_t>(states_.size()); }

 private:
  struct SequenceState {
    SequenceState(const ModelConfig& config, const Sequence& seq);
    SequenceKvCache cache;  // [prompt + max_new_tokens] positions
    Sampler sampler;
  };
  SequenceState& state_for(const Sequence& seq);

  LlamaModel& model_;
  ThreadPool& pool_;
  std::unordered_map<int64_t, std::unique_ptr<SequenceState>> states_;
  std::vector<float> logits_;  // [vocab_size], reused across sequences
};

}  // namespace lm
