// Small elementwise and row kernels of the Llama block and the sampler: SwiGLU, residual add,
// softmax and its normaliser.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace lm::kernels {

// out[i] = silu(gate[i]) * up[i], silu(x) = x * sigmoid(x) in fp32 (the scalar table computes it
// as torch does; the vector tables with a polynomial exp, relative error < 3e-7). out may alias
// gate or up.
void silu_mul(const float* gate, const float* up, float* out, int64_t n, Isa isa = best_isa());

// out[i] = gelu_tanh(gate[i]) * up[i], gelu_tanh(x) = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x +
// 0.044715 * x^3))) (torch's approximate="tanh", Gemma's GeGLU) in fp32; the vector tables compute
// x * sigmoid(2 * inner) with the polynomial exp. out may alias gate or up.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n, Isa isa = best_isa());

// sum over i < n of exp(x[i] - shift), every x[i] <= shift (shift: their max): a softmax's
// normaliser. The scalar table sums libm's exps in order in a double; the vector tables use a
// polynomial exp (relative error < 2e-7) and add in float lanes over stretches of 256 values
// before the double, so the sum's last bits depend on the table.
double sum_exp(const float* x, int64_t n, float shift, Isa isa = best_isa());

// A row of logits made safe to sample: NaN becomes -inf and +inf the largest float, in place.
// The same values at every level.
void sanitize_scores(float* x, int64_t n, Isa isa = best_isa());

// The lowest i < n with x[i] > -inf and no x[j] > x[i] (NaN never counts), or -1 when there is
// none (where the sampler answers 0, as torch.argmax does). The same index at every level.
int64_t first_max(const float* x, int64_t n, Isa isa = best_isa());

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);

// x[i] = exp(x[i] - max) / sum_j exp(x[j] - max); safe for large logits.
void softmax_inplace(float* x, int64_t n);

}  // namespace lm::kernels
