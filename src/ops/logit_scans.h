// The sampler's scans over a row of logits: runtime/ reaches the vector kernels through these
// ops instead of including kernels/ (host rows only; the logits are copied to the host before
// sampling).
#pragma once

#include <cstdint>
#include <span>

namespace lm::ops {

// sum over i of exp(x[i] - shift), every x[i] <= shift (shift: their max), with the best vector
// kernel of this CPU: the last bits depend on the ISA (kernels::sum_exp).
double sum_exp(std::span<const float> x, float shift);

// NaN to -inf and +inf to the largest float, in place (kernels::sanitize_scores).
void sanitize_scores(std::span<float> x);

// The lowest id holding the largest value above -inf (NaN never counts), or -1 when there is
// none (kernels::first_max). The same at every ISA level.
int64_t first_max(std::span<const float> x);

}  // namespace lm::ops
