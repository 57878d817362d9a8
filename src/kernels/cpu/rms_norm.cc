// RMSNorm over each row; the sum of squares uses the ISA's fp32 dot.
#include "kernels/cpu/rms_norm.h"

#include <cmath>

#include "base/check.h"

namespace lm::kernels {

void rms_norm(const float* x, const float* weight, float* y, int64_t rows, int64_t n, float eps,
              Isa isa) {
  LM_CHECK(rows >= 0 && n > 0);
  const IsaKernels& kernels = isa_kernels(isa);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float mean_square = kernels.dot_f32(xr, xr, n) / static_cast<float>(n);
    const float inv_rms = 1.0f / std::sqrt(mean_square + eps);
    // HF order: normalize first, then multiply by the weight.
    for (int64_t i = 0; i < n; ++i) yr[i] = weight[i] * (xr[i] * inv_rms);
  }
}

}  // namespace lm::kernels
