// RMSNorm: one block per row; the sum of squares is a block reduction in fp32, then every thread
// scales its elements. Normalize-then-weight order as HF, like the CPU twin.
#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/rms_norm.h"

namespace lm::kernels::cuda {
namespace {

__global__ void rms_norm_kernel(const float* x, const float* weight, float* y, int64_t n,
                                float eps) {
  __shared__ float scratch[32];
  const float* xr = x + blockIdx.x * n;
  float* yr = y + blockIdx.x * n;
  float sum_squares = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum_squares += xr[i] * xr[i];
  sum_squares = block_sum(sum_squares, scratch);
  // 1 / sqrt rather than rsqrtf: rsqrtf is an approximation (2 ulp) and the CPU divides.
  const float inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = weight[i] * (xr[i] * inv_rms);
}

}  // namespace

void rms_norm(const float* x, const float* weight, float* y, int64_t rows, int64_t n, float eps,
              cudaStream_t stream) {
  LM_CHECK(rows >= 0 && n > 0);
  if (rows == 0) return;
  const int threads = n >= 4096 ? 1024 : (n >= 1024 ? 256 : 128);
  rms_norm_kernel<<<static_cast<unsigned>(rows), threads, 0, stream>>>(x, weight, y, n, eps);
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lm::kernels::cuda
