// RMSNorm as HF LlamaRMSNorm computes it in fp32: y = (x * rsqrt(mean(x^2) + eps)) * weight.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace lm::kernels {

// x, y: [rows, n] (y may alias x); weight: [n].
void rms_norm(const float* x, const float* weight, float* y, int64_t rows, int64_t n, float eps,
              Isa isa = best_isa());

}  // namespace lm::kernels
