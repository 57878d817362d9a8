// Grid-stride elementwise kernels over [rows, n].
#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/rows.h"

namespace lm::kernels::cuda {
namespace {

__global__ void gather_rows_kernel(const float* x, const int32_t* rows, float* out,
                                   int64_t num_rows, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < num_rows * n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = x[int64_t{rows[i / n]} * n + i % n];
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t num_rows, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < num_rows * n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] += bias[i % n];
}

}  // namespace

void gather_rows(const float* x, const int32_t* rows, float* out, int64_t num_rows, int64_t n,
                 cudaStream_t stream) {
  LM_CHECK(num_rows >= 0 && n > 0);
  if (num_rows == 0) return;
  gather_rows_kernel<<<elementwise_blocks(num_rows * n), kElementwiseThreads, 0, stream>>>(
      x, rows, out, num_rows, n);
  LM_CUDA_CHECK(cudaGetLastError());
}

void add_bias_rows(float* y, const float* bias, int64_t num_rows, int64_t n, cudaStream_t stream) {
  LM_CHECK(num_rows >= 0 && n > 0);
  if (num_rows == 0) return;
  add_bias_kernel<<<elementwise_blocks(num_rows * n), kElementwiseThreads, 0, stream>>>(
      y, bias, num_rows, n);
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lm::kernels::cuda
