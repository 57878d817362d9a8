// Forwards to the CPU kernel. Needs only kernels/cpu (no tensor/), so the CUDA twin tests can
// compile it beside the sampler without lm_ops.
#include "ops/sum_exp.h"

#include <cstdint>

#include "kernels/cpu/activations.h"

namespace lm::ops {

double sum_exp(std::span<const float> x, float shift) {
  return kernels::sum_exp(x.data(), static_cast<int64_t>(x.size()), shift);
}

}  // namespace lm::ops
