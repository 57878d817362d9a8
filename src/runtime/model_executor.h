// ModelExecutor: the engine's Executor over a LlamaModel on the CPU. Owns the paged K/V pool of
// all sequences and each running sequence's Sampler and, for a constrained one, its
// GrammarMatcher (created on first sight, freed on release); every step is one batched forward
// over all scheduled tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <future>
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
  // thread may use them. The K/V pool gets kv_num_blocks(config) blocks of config.block_size,
  // elements in kv_dtype (KvPool).
  ModelExecutor(LlamaModel& model, ThreadPool& pool, const EngineConfig& config,
                DType kv_dtype = DType::kF32);

  Status check_request(const EngineRequest& request) const override;
  Result<std::vector<SampleResult>> execute(const ScheduledBatch& batch) override;
  void release(int64_t seq_id) override;
  void return_blocks(const std::vector<int32_t>& block_ids) override {
    kv_.return_pages(block_ids);
  }
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
  // Records a prompt_logprobs sequence's scores from its `num_rows` prompt rows of `logits`
  // (positions first_position, first_position + 1, ...) in prompt_logprobs_.
  void gather_prompt_logprobs(const Sequence& seq, int64_t first_position, int64_t num_rows,
                              std::span<const float> logits);
  // One sampling row's grammar: its matcher (null: unconstrained) and next-token mask.
  struct GrammarRow {
    GrammarMatcher* matcher = nullptr;
    std::vector<int32_t> bitmask;
    bool masked = false;  // false: every token allowed
  };
  // Fills grammar_rows_ (one per sampling row) and starts computing the constrained rows' masks
  // on a helper thread; an invalid future when no row is constrained.
  std::future<void> start_grammar_masks(const ScheduledBatch& batch);

  LlamaModel& model_;
  ThreadPool& pool_;
  KvPool kv_;
  // NOTE: a preempted sequence keeps its Sampler (RNG state, penalty counts) and its grammar
  // matcher (its generated tokens are kept too), so its recompute continues exactly where it
  // left off; only release frees them.
  std::unordered_map<int64_t, std::unique_ptr<Sampler>> samplers_;
  std::unordered_map<int64_t, std::unique_ptr<GrammarMatcher>> matchers_;
  std::vector<GrammarRow> grammar_rows_;  // this step's, by sampling row
  // Prompt logprobs gathered over a prompt_logprobs request's chunks until its first token takes
  // them (index i scores prompt token i + 1), with the alternatives when prompt_top_n_tokens > 0.
  struct PromptLogprobs {
    std::vector<float> logprobs;
    std::vector<std::vector<TokenLogprob>> top_tokens;
  };
  std::unordered_map<int64_t, PromptLogprobs> prompt_logprobs_;
  std::vector<int32_t> top_scratch_;  // top_n_logprobs' heap for prompt rows
  StepInputs inputs_;
  std::vector<float> logits_;  // [sampling sequences, vocab_size]
  bool reject_non_finite_logits_ = false;
  ExecuteTimings timings_;  // of the last execute()
};

}  // namespace lm
