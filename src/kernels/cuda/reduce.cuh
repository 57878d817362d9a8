// Warp and block reductions shared by the row kernels (RMSNorm, sampling, attention).
#pragma once

#include <cuda_runtime.h>

namespace lm::kernels::cuda {

inline constexpr unsigned kFullMask = 0xffffffffu;

template <typename T>
__device__ __forceinline__ T warp_sum(T value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

// Sum over the block, returned to every thread. `scratch` holds 32 values; blockDim.x must be a
// multiple of 32. Ends with a barrier, so scratch may be reused right after.
template <typename T>
__device__ T block_sum(T value, T* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  value = warp_sum(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  T total = lane < num_warps ? scratch[lane] : T(0);
  total = warp_sum(total);
  __syncthreads();
  return total;
}

__device__ inline float block_max(float value, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  value = warp_max(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float result = lane < num_warps ? scratch[lane] : -INFINITY;
  result = warp_max(result);
  __syncthreads();
  return result;
}

}  // namespace lm::kernels::cuda
