// Grid-stride elementwise kernels. expf (not __expf) keeps silu within a few ulp of the CPU's.
#include "base/check.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/grid.cuh"

namespace lm::kernels::cuda {
namespace {

__global__ void silu_mul_kernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void add_inplace_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] += x[i];
}

}  // namespace

void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  LM_CHECK(n >= 0);
  if (n == 0) return;
  silu_mul_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(gate, up, out, n);
  LM_CUDA_CHECK(cudaGetLastError());
}

void add_inplace(float* y, const float* x, int64_t n, cudaStream_t stream) {
  LM_CHECK(n >= 0);
  if (n == 0) return;
  add_inplace_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(y, x, n);
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lm::kernels::cuda
