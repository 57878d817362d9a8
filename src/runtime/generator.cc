#include "runtime/generator.h"

#include <algorithm>
#include <string>

#include "runtime/kv_cache.h"
#include "runtime/request_check.h"

namespace lm {

Result<GenerationResult> Generator::generate(
    const EngineRequest& request, const std::function<bool(const SampleResult&)>& on_token) {
  const ModelConfig& config = model_.config();
  const auto prompt_len = static_cast<int64_t>(request.prompt_ids.size());
  if (prompt_len == 0) return Error{"the prompt is empty"};
  if (request.max_new_tokens < 1) return Error{"max_new_tokens must be at least 1"};
  LM_RETURN_IF_ERROR(check_request_fits_model(config, request));
  const int64_t total = prompt_len + request.max_new_tokens;
  const std::vector<int32_t>& eos = config.eos_token_ids;

  SequenceKvCache cache(config, total);
  Sampler sampler(request.sampling, request.prompt_ids);
  std::vector<float> logits;
  GenerationResult result;
  model_.forward(request.prompt_ids, 0, cache.view(), /*all_logits=*/false, logits, pool_);
  for (int64_t step = 0;; ++step) {
    SampleResult token = sampler.sample(logits);
    sampler.observe(token.id);
    result.tokens.push_back(token);
    const bool keep_going = !on_token || on_token(token);
    if (static_cast<int64_t>(result.tokens.size()) >= request.max_new_tokens) {
      result.finish_reason = FinishReason::kLength;
      break;
    }
    if (!request.ignore_eos && std::find(eos.begin(), eos.end(), token.id) != eos.end()) {
      result.finish_reason = FinishReason::kEosToken;
      break;
    }
    if (!keep_going) {
      result.finish_reason = FinishReason::kStopSequence;
      break;
    }
    const int32_t next = token.id;
    model_.forward({&next, 1}, prompt_len + step, cache.view(), /*all_logits=*/false, logits,
                   pool_);
  }
  return result;
}

}  // namespace lm
