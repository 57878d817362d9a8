#include "runtime/warmup.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/kv_cache.h"
#include "runtime/sampler.h"

namespace lm {

Status warm_up(LlamaModel& model, ThreadPool& pool, int64_t num_tokens) {
  if (num_tokens < 1) return Error{"the warm-up needs at least one token"};
  const ModelConfig& config = model.config();
  const int64_t n = std::min(num_tokens, config.max_context());
  std::vector<int32_t> prompt_ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)  // varied ids, so no kernel sees a degenerate input
    prompt_ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 1) % config.vocab_size);

  SequenceKvCache cache(config, n);
  std::vector<float> logits;
  model.forward(prompt_ids, 0, cache.view(), /*all_logits=*/false, logits, pool);
  for (float x : logits) {
    if (!std::isfinite(x)) {
      return Error{"the warm-up forward of " + std::to_string(n) +
                   " tokens produced a non-finite logit; the model's weights are broken"};
    }
  }
  // TGI's warm-up parameters (spec §5.6), so the whole processor chain runs once.
  SamplingParams params{.do_sample = true,
                        .temperature = 0.9f,
                        .top_k = 10,
                        .top_p = 0.9f,
                        .typical_p = 0.9f,
                        .repetition_penalty = 1.2f,
                        .frequency_penalty = 0.1f,
                        .top_n_tokens = 20};
  Sampler sampler(params, prompt_ids);
  const SampleResult token = sampler.sample(logits);
  if (token.id < 0 || token.id >= config.vocab_size)
    return Error{"the warm-up sampled token id " + std::to_string(token.id) + " out of range"};
  return {};
}

}  // namespace lm
