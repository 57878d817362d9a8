#include "runtime/warmup.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/run_to_completion.h"
#include "runtime/model_executor.h"

namespace lm {

namespace {

// Lends an executor the caller keeps to the warm-up's Engine.
class BorrowedExecutor final : public Executor {
 public:
  explicit BorrowedExecutor(Executor& executor) : executor_(executor) {}
  Status check_request(const EngineRequest& request) const override {
    return executor_.check_request(request);
  }
  Result<std::vector<SampleResult>> execute(const ScheduledBatch& batch) override {
    return executor_.execute(batch);
  }
  void release(int64_t seq_id) override { executor_.release(seq_id); }

 private:
  Executor& executor_;
};

// The whole prompt in one step, with K/V for exactly this request.
EngineConfig warm_up_config(const ModelConfig& config, int64_t num_tokens, int64_t block_size) {
  const int64_t n = std::max<int64_t>(1, std::min(num_tokens, config.max_context() - 1));
  EngineConfig engine_config;
  engine_config.max_batch_prefill_tokens = n;
  engine_config.max_batch_total_tokens = n + 1;
  engine_config.block_size = block_size;
  return engine_config;
}

Status run_warm_up(std::unique_ptr<Executor> executor, const ModelConfig& config,
                   const EngineConfig& engine_config) {
  const int64_t n = engine_config.max_batch_prefill_tokens;
  EngineRequest request;
  request.prompt_ids.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)  // varied ids, so no kernel sees a degenerate input
    request.prompt_ids[static_cast<size_t>(i)] =
        static_cast<int32_t>((i * 7919 + 1) % config.vocab_size);
  request.max_new_tokens = 1;
  request.ignore_eos = true;
  // TGI's warm-up parameters (spec §5.6), so the whole processor chain runs once.
  request.sampling = SamplingParams{.do_sample = true,
                                    .temperature = 0.9f,
                                    .top_k = 10,
                                    .top_p = 0.9f,
                                    .typical_p = 0.9f,
                                    .repetition_penalty = 1.2f,
                                    .frequency_penalty = 0.1f,
                                    .top_n_tokens = 20,
                                    .logit_bias = {{0, 0.0f}}};
  Engine engine(engine_config, std::move(executor));
  Result<GenerationResult> result = run_to_completion(engine, std::move(request));
  engine.drain();
  if (!result.ok()) return Error{"the warm-up failed: " + result.error().message};
  const int32_t id = result->tokens.at(0).id;
  if (id < 0 || id >= config.vocab_size)
    return Error{"the warm-up sampled token id " + std::to_string(id) + " out of range"};
  return {};
}

}  // namespace

Status warm_up(LlamaModel& model, ThreadPool& pool, int64_t num_tokens, DType kv_dtype) {
  if (num_tokens < 1) return Error{"the warm-up needs at least one token"};
  const EngineConfig engine_config = warm_up_config(model.config(), num_tokens, 16);
  auto executor = std::make_unique<ModelExecutor>(model, pool, engine_config, kv_dtype);
  executor->set_reject_non_finite_logits(true);
  return run_warm_up(std::move(executor), model.config(), engine_config);
}

Status warm_up(Executor& executor, const ModelConfig& config, int64_t num_tokens,
               int64_t block_size) {
  if (num_tokens < 1) return Error{"the warm-up needs at least one token"};
  return run_warm_up(std::make_unique<BorrowedExecutor>(executor), config,
                     warm_up_config(config, num_tokens, block_size));
}

}  // namespace lm
