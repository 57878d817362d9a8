#include "runtime/generator.h"

#include <algorithm>
#include <string>

#include "runtime/kv_cache.h"

namespace lm {

Result<GenerationResult> Generator::generate(
    const GenerationRequest& request, const std::function<bool(const SampleResult&)>& on_token) {
  const ModelConfig& config = model_.config();
  const auto prompt_len = static_cast<int64_t>(request.prompt_ids.size());
  if (prompt_len == 0) return Error{"the prompt is empty"};
  if (request.max_new_tokens < 1) return Error{"max_new_tokens must be at least 1"};
  for (int32_t id : request.prompt_ids) {
    if (id < 0 || id >= config.vocab_size)
      return Error{"prompt token id " + std::to_string(id) + " is outside the vocabulary"};
  }
  const int64_t total = prompt_len + request.max_new_tokens;
  if (total > config.max_context()) {
    return Error{"prompt (" + std::to_string(prompt_len) + " tokens) + max_new_tokens (" +
                 std::to_string(request.max_new_tokens) + ") exceeds the model's context of " +
                 std::to_string(config.max_context()) + " tokens"};
  }
  const std::vector<int32_t>& eos =
      request.eos_token_ids.empty() ? config.eos_token_ids : request.eos_token_ids;

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
