// ModelExecutor: the engine's Executor over a LlamaModel on the CPU. Owns the paged K/V pool of
// all sequences and the StepSampler (each running sequence's Sampler and grammar matcher); every
// step is one batched forward over all scheduled tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/engine_config.h"
#include "engine/executor.h"
#include "model/llama_model.h"
#include "runtime/kv_pool.h"
#include "runtime/step_inputs.h"
#include "runtime/step_sampler.h"

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
  int64_t num_sequences() const { return step_sampler_.num_sequences(); }
  KvPool& kv_pool() { return kv_; }

 private:
  LlamaModel& model_;
  ThreadPool& pool_;
  KvPool kv_;
  StepSampler step_sampler_;
  StepInputs inputs_;
  std::vector<float> logits_;  // [sampling sequences, vocab_size]
  bool reject_non_finite_logits_ = false;
  ExecuteTimings timings_;  // of the last execute()
};

}  // namespace lm
