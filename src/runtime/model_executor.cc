#include "runtime/model_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <string>

#include "runtime/lap_clock.h"
#include "runtime/request_check.h"

namespace lm {
ModelExecutor::ModelExecutor(LlamaModel& model, ThreadPool& pool, const EngineConfig& config,
                             DType kv_dtype)
    : model_(model),
      pool_(pool),
      kv_(model.config(), kv_num_blocks(config), config.block_size, kv_dtype),
      step_sampler_(model.config().vocab_size) {}

Status ModelExecutor::check_request(const EngineRequest& request) const {
  return check_request_fits_model(model_.config(), request);
}

Result<std::vector<SampleResult>> ModelExecutor::execute(const ScheduledBatch& batch) {
  timings_ = {};
  if (batch.empty()) return std::vector<SampleResult>{};
  auto clock = std::chrono::steady_clock::now();
  // One forward for every scheduled token: each weight matrix is read once per step.
  inputs_.build(batch, kv_.block_size(), kv_.num_blocks());
  std::future<void> grammar_masks = step_sampler_.start_grammar_masks(batch);
  timings_.prepare_seconds = seconds_since(clock);
  model_.forward_batch(inputs_.view(), kv_.view(), logits_, pool_);
  if (grammar_masks.valid()) grammar_masks.get();
  timings_.forward_seconds = seconds_since(clock);
  if (reject_non_finite_logits_ &&
      !std::all_of(logits_.begin(), logits_.end(), [](float x) { return std::isfinite(x); })) {
    return Error{"the forward of " + std::to_string(batch.num_tokens()) +
                 " tokens produced a non-finite logit; the model's weights are broken"};
  }

  std::vector<SampleResult> samples =
      step_sampler_.sample(batch, inputs_.num_prompt_rows(), logits_);
  timings_.sample_seconds = seconds_since(clock);
  return samples;
}

void ModelExecutor::release(int64_t seq_id) { step_sampler_.release(seq_id); }

}  // namespace lm
