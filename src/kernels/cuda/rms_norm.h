// RMSNorm on the device with the CPU twin's fp32 numerics (kernels/cpu/rms_norm.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lm::kernels::cuda {

// x, y: [rows, n] fp32 (y may alias x); weight: [n]. y = weight * (x * rsqrt(mean(x^2) + eps)).
void rms_norm(const float* x, const float* weight, float* y, int64_t rows, int64_t n, float eps,
              cudaStream_t stream);

}  // namespace lm::kernels::cuda
