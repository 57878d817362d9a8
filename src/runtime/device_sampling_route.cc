#include "runtime/device_sampling_route.h"

namespace lm {

bool samples_on_device(const SamplingParams& p, bool constrained, bool has_proposals) {
  if (constrained || !p.logit_bias.empty() || p.top_n_tokens > 0) return false;
  if (p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f)
    return false;
  return !(p.is_random() && has_proposals);
}

}  // namespace lm
