// Elementwise kernels: SiLU·mul and the sum of exps through the ISA table (their exp is
// vectorised there; the scalar table keeps libm's), the rest in plain C++.
#include "kernels/cpu/activations.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace lm::kernels {

void silu_mul(const float* gate, const float* up, float* out, int64_t n, Isa isa) {
  isa_kernels(isa).silu_mul(gate, up, out, n);
}

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n, Isa isa) {
  isa_kernels(isa).gelu_tanh_mul(gate, up, out, n);
}

double sum_exp(const float* x, int64_t n, float shift, Isa isa) {
  return isa_kernels(isa).sum_exp(x, n, shift);
}

void sanitize_scores(float* x, int64_t n, Isa isa) { isa_kernels(isa).sanitize_scores(x, n); }

int64_t first_max(const float* x, int64_t n, Isa isa) {
  LM_CHECK(n < (int64_t{1} << 24));  // the vector tables carry ids in float lanes
  return isa_kernels(isa).first_max(x, n);
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void softmax_inplace(float* x, int64_t n) {
  LM_CHECK(n > 0);
  const float max = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv_sum = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv_sum;
}

}  // namespace lm::kernels
