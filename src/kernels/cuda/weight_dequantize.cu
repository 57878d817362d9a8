// One thread per output element pair range: block formats decode their 32-value blocks from
// 16-bit words (the blocks are 18/20/34 bytes, 2-byte aligned), the values in GGML's order
// (element i < 16 the low nibble of byte i, element i + 16 its high nibble).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/weight_dequantize.h"

namespace lm::kernels::cuda {
namespace {

__device__ __forceinline__ float half_bits(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

// Element i of a row in `format`.
__device__ __forceinline__ float element(RowFormat format, const uint8_t* row, int64_t i) {
  const int64_t b = i / 32, e = i % 32;
  switch (format) {
    case RowFormat::kF32:
      return reinterpret_cast<const float*>(row)[i];
    case RowFormat::kF16:
      return half_bits(reinterpret_cast<const uint16_t*>(row)[i]);
    case RowFormat::kBF16:
      return __bfloat162float(__ushort_as_bfloat16(reinterpret_cast<const uint16_t*>(row)[i]));
    case RowFormat::kQ8_0: {
      const uint8_t* block = row + b * 34;
      const float d = half_bits(*reinterpret_cast<const uint16_t*>(block));
      return d * static_cast<float>(static_cast<int8_t>(block[2 + e]));
    }
    case RowFormat::kQ4_0: {
      const uint8_t* block = row + b * 18;
      const float d = half_bits(*reinterpret_cast<const uint16_t*>(block));
      const uint8_t q = block[2 + e % 16];
      const int nibble = e < 16 ? (q & 0xf) : (q >> 4);
      return (static_cast<float>(nibble) - 8.0f) * d;
    }
    case RowFormat::kQ4_1: {
      const uint8_t* block = row + b * 20;
      const uint16_t* words = reinterpret_cast<const uint16_t*>(block);
      const float d = half_bits(words[0]), m = half_bits(words[1]);
      const uint8_t q = block[4 + e % 16];
      const int nibble = e < 16 ? (q & 0xf) : (q >> 4);
      return static_cast<float>(nibble) * d + m;
    }
    default:
      return 0.0f;  // refused on the host
  }
}

__global__ void dequantize_kernel(RowFormat format, const uint8_t* w, int64_t w_row_bytes,
                                  __half* out, int64_t rows, int64_t k) {
  const int64_t n = rows * k;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / k;
    out[i] = __float2half_rn(element(format, w + r * w_row_bytes, i % k));
  }
}

__global__ void round_kernel(const float* x, void* out, int64_t n, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    if (bf16) {
      static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(x[i]);
    } else {
      static_cast<__half*>(out)[i] = __float2half_rn(x[i]);
    }
  }
}

}  // namespace

bool dequantize_supports(RowFormat format) {
  switch (format) {
    case RowFormat::kF32:
    case RowFormat::kF16:
    case RowFormat::kBF16:
    case RowFormat::kQ8_0:
    case RowFormat::kQ4_0:
    case RowFormat::kQ4_1:
      return true;
    default:
      return false;
  }
}

void dequantize_rows_f16(RowFormat format, const void* w, int64_t w_row_bytes, void* out,
                         int64_t rows, int64_t k, cudaStream_t stream) {
  LM_CHECK(dequantize_supports(format) && rows >= 0 && k >= 0);
  LM_CHECK(k % row_format_info(format).block_size == 0);
  if (rows == 0 || k == 0) return;
  dequantize_kernel<<<elementwise_blocks(rows * k), kElementwiseThreads, 0, stream>>>(
      format, static_cast<const uint8_t*>(w), w_row_bytes, static_cast<__half*>(out), rows, k);
  LM_CUDA_CHECK(cudaGetLastError());
}

void round_activations(const float* x, void* out, int64_t n, bool bf16, cudaStream_t stream) {
  LM_CHECK(n >= 0);
  if (n == 0) return;
  round_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(x, out, n, bf16);
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lm::kernels::cuda
