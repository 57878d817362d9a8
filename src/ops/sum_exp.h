// The softmax normaliser over a row of logits, for the sampler: runtime/ reaches the vector
// kernel through this op instead of including kernels/ (host rows only; the logits are copied
// to the host before sampling).
#pragma once

#include <span>

namespace lm::ops {

// sum over i of exp(x[i] - shift), every x[i] <= shift (shift: their max), with the best vector
// kernel of this CPU: the last bits depend on the ISA (kernels::sum_exp).
double sum_exp(std::span<const float> x, float shift);

}  // namespace lm::ops
