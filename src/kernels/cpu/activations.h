// Small elementwise and row kernels of the Llama block: SwiGLU, residual add, softmax.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace lm::kernels {

// out[i] = silu(gate[i]) * up[i], silu(x) = x * sigmoid(x) in fp32 (the scalar table computes it
// as torch does; the vector tables with a polynomial exp, relative error < 3e-7). out may alias
// gate or up.
void silu_mul(const float* gate, const float* up, float* out, int64_t n, Isa isa = best_isa());

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);

// x[i] = exp(x[i] - max) / sum_j exp(x[j] - max); safe for large logits.
void softmax_inplace(float* x, int64_t n);

}  // namespace lm::kernels
