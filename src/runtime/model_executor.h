// ModelExecutor: the engine's Executor over a LlamaModel on the CPU. Owns the paged K/V pool of
// all sequences and each running sequence's Sampler and, for a constrained one, its
// GrammarMatcher (created on first sight, freed on release); every step is one batched forward
// over all scheduled tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/engine_config.h"
#include "engine/executor.h"
#include "grammar/grammar_matcher.h"
#include "model/llama_model.h"
#include "runtime/kv_pool.h"
#include "runtime/sampler.h"
#include "runtime/step_inputs.h"

namespace lm {

class ModelExecutor final : public Executor {
 public:
  // `model` and `pool` must outlive the executor; while an Engine drives it, only the engine
  // thread may use them. The K/V pool gets kv_num_blocks(config) blocks of config.block_size.
  ModelExecutor(LlamaModel& model, ThreadPool& pool, const EngineConfig& config);

  Status check_request(const EngineRequest& request) const override;
  Result<std::vector<SampleResult>> execute(const ScheduledBatch& batch) override;
  void release(int64_t seq_id) override;
  ExecuteTimings last_timings() const override { return timings_; }

  // Fail a step whose sampled rows hold a NaN or infinite logit instead of sampling from it
  // (the sampler treats NaN as -inf). Warm-up turns it on, so a broken model fails before
  // traffic; serving leaves it off.
  void set_reject_non_finite_logits(bool on) { reject_non_finite_logits_ = on; }

  // Sequences holding a Sampler or a grammar matcher (seen and not yet released).
  int64_t num_sequences() const {
    return static_cast<int64_t>(std::max(samplers_.size(), matchers_.size()));
  }
  KvPool& kv_pool() { return kv_; }

 private:
  Sampler& sampler_for(const Sequence& seq);
  // The allowed next tokens of a constrained sequence (empty: unconstrained or all allowed).
  std::span<const int32_t> grammar_bitmask_for(const Sequence& seq);

  LlamaModel& model_;
  ThreadPool& pool_;
  KvPool kv_;
  // NOTE: a preempted sequence keeps its Sampler (RNG state, penalty counts) and its grammar
  // matcher (its generated tokens are kept too), so its recompute continues exactly where it
  // left off; only release frees them.
  std::unordered_map<int64_t, std::unique_ptr<Sampler>> samplers_;
  // NOTE: each mask is computed on the engine thread after the forward, not overlapped with it:
  // SmolLM2-135M at batch 1 on 2 cores went from ~13 to ~16 ms per token with a JSON schema.
  std::unordered_map<int64_t, std::unique_ptr<GrammarMatcher>> matchers_;
  std::vector<int32_t> bitmask_;  // the current sequence's mask
  StepInputs inputs_;
  std::vector<float> logits_;  // [sampling sequences, vocab_size]
  bool reject_non_finite_logits_ = false;
  ExecuteTimings timings_;  // of the last execute()
};

}  // namespace lm
