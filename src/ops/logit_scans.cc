// Forwards to the CPU kernels. Needs only kernels/cpu (no tensor/), so the CUDA twin tests can
// compile it beside the sampler without lm_ops.
#include "ops/logit_scans.h"

#include "kernels/cpu/activations.h"

namespace lm::ops {

double sum_exp(std::span<const float> x, float shift) {
  return kernels::sum_exp(x.data(), static_cast<int64_t>(x.size()), shift);
}

void sanitize_scores(std::span<float> x) {
  kernels::sanitize_scores(x.data(), static_cast<int64_t>(x.size()));
}

int64_t first_max(std::span<const float> x) {
  return kernels::first_max(x.data(), static_cast<int64_t>(x.size()));
}

}  // namespace lm::ops
