// GEMV with in-register dequantization: a warp per weight row. For block formats each lane takes
// whole 32-element blocks (block b, b + 32, ...) so a warp's loads cover consecutive blocks; the
// blocks are 2-byte aligned (18/20/34 bytes), so they are read as 16-bit words. Float formats read
// 16 bytes per lane per step when the rows are aligned for it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dequant_gemv.h"
#include "kernels/cuda/reduce.cuh"

namespace lm::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;

__device__ __forceinline__ float half_bits_to_float(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

__device__ __forceinline__ float bf16_bits_to_float(uint16_t bits) {
  return __bfloat162float(__ushort_as_bfloat16(bits));
}

// Sum over one Q4_0/Q4_1 block of nibble * x (q4_1: also sum of x, for the block minimum).
// Element i < 16 is the low nibble of qs[i], element i + 16 the high one.
template <bool kWithMin>
__device__ __forceinline__ float dot_q4_block(const uint16_t* qs, const float2* x_lo,
                                              const float2* x_hi, float offset, float d, float m) {
  float sum_qx = 0.0f;
  float sum_x = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t pair = qs[i];  // bytes 2i (low) and 2i + 1 (high)
    const float2 xl = x_lo[i];    // elements 2i, 2i + 1
    const float2 xh = x_hi[i];    // elements 2i + 16, 2i + 17
    sum_qx += (static_cast<float>(pair & 0xf) - offset) * xl.x;
    sum_qx += (static_cast<float>((pair >> 8) & 0xf) - offset) * xl.y;
    sum_qx += (static_cast<float>((pair >> 4) & 0xf) - offset) * xh.x;
    sum_qx += (static_cast<float>(pair >> 12) - offset) * xh.y;
    if (kWithMin) sum_x += xl.x + xl.y + xh.x + xh.y;
  }
  return kWithMin ? d * sum_qx + m * sum_x : d * sum_qx;
}

__device__ float row_dot(RowFormat format, const uint8_t* row, const float* x, int64_t k,
                         bool vector_ok, int lane) {
  float sum = 0.0f;
  const int64_t num_blocks = k / 32;
  const float2* x2 = reinterpret_cast<const float2*>(x);
  switch (format) {
    case RowFormat::kQ4_0:
      for (int64_t b = lane; b < num_blocks; b += 32) {
        const uint16_t* block = reinterpret_cast<const uint16_t*>(row + b * 18);
        sum += dot_q4_block<false>(block + 1, x2 + b * 16, x2 + b * 16 + 8, 8.0f,
                                   half_bits_to_float(block[0]), 0.0f);
      }
      break;
    case RowFormat::kQ4_1:
      for (int64_t b = lane; b < num_blocks; b += 32) {
        const uint16_t* block = reinterpret_cast<const uint16_t*>(row + b * 20);
        sum += dot_q4_block<true>(block + 2, x2 + b * 16, x2 + b * 16 + 8, 0.0f,
                                  half_bits_to_float(block[0]), half_bits_to_float(block[1]));
      }
      break;
    case RowFormat::kQ8_0:
      for (int64_t b = lane; b < num_blocks; b += 32) {
        const uint16_t* block = reinterpret_cast<const uint16_t*>(row + b * 34);
        float block_sum = 0.0f;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const uint32_t pair = block[1 + i];
          const float2 xv = x2[b * 16 + i];
          block_sum += static_cast<float>(static_cast<int8_t>(pair & 0xff)) * xv.x;
          block_sum += static_cast<float>(static_cast<int8_t>(pair >> 8)) * xv.y;
        }
        sum += half_bits_to_float(block[0]) * block_sum;
      }
      break;
    case RowFormat::kF16:
    case RowFormat::kBF16: {
      const bool is_f16 = format == RowFormat::kF16;
      const uint16_t* values = reinterpret_cast<const uint16_t*>(row);
      if (vector_ok) {  // 8 values (16 bytes) per lane per step
        const uint4* chunks = reinterpret_cast<const uint4*>(row);
        const float4* x4 = reinterpret_cast<const float4*>(x);
        for (int64_t c = lane; c < k / 8; c += 32) {
          const uint4 chunk = chunks[c];
          const uint32_t words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
          const float4 xa = x4[2 * c];
          const float4 xb = x4[2 * c + 1];
          const float xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const uint16_t lo = static_cast<uint16_t>(words[i] & 0xffff);
            const uint16_t hi = static_cast<uint16_t>(words[i] >> 16);
            sum += (is_f16 ? half_bits_to_float(lo) : bf16_bits_to_float(lo)) * xs[2 * i];
            sum += (is_f16 ? half_bits_to_float(hi) : bf16_bits_to_float(hi)) * xs[2 * i + 1];
          }
        }
      } else {
        for (int64_t i = lane; i < k; i += 32)
          sum += (is_f16 ? half_bits_to_float(values[i]) : bf16_bits_to_float(values[i])) * x[i];
      }
      break;
    }
    case RowFormat::kF32: {
      const float* values = reinterpret_cast<const float*>(row);
      if (vector_ok) {
        const float4* v4 = reinterpret_cast<const float4*>(row);
        const float4* x4 = reinterpret_cast<const float4*>(x);
        for (int64_t c = lane; c < k / 4; c += 32) {
          const float4 a = v4[c];
          const float4 b = x4[c];
          sum += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
        }
      } else {
        for (int64_t i = lane; i < k; i += 32) sum += values[i] * x[i];
      }
      break;
    }
    default:
      break;  // rejected on the host
  }
  return warp_sum(sum);
}

__global__ void gemv_kernel(RowFormat format, const uint8_t* w, int64_t w_row_bytes, const float* x,
                            float* y, int64_t n, int64_t k, const float* bias, bool vector_ok) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (row >= n) return;
  const float sum = row_dot(format, w + row * w_row_bytes, x, k, vector_ok, threadIdx.x % 32);
  if (threadIdx.x % 32 == 0) y[row] = bias != nullptr ? sum + bias[row] : sum;
}

}  // namespace

bool gemv_supports(RowFormat format) {
  return format == RowFormat::kF32 || format == RowFormat::kF16 || format == RowFormat::kBF16 ||
         format == RowFormat::kQ8_0 || format == RowFormat::kQ4_0 || format == RowFormat::kQ4_1;
}

void dequant_gemv(RowFormat format, const void* w, int64_t w_row_bytes, const float* x, float* y,
                  int64_t n, int64_t k, const float* bias, cudaStream_t stream) {
  LM_CHECK_MSG(gemv_supports(format), "dequant_gemv: unsupported row format");
  LM_CHECK(n >= 0 && k > 0 && k % row_format_info(format).block_size == 0);
  LM_CHECK(w_row_bytes >= row_bytes(format, k));
  LM_CHECK(reinterpret_cast<uintptr_t>(x) % 16 == 0);
  LM_CHECK(reinterpret_cast<uintptr_t>(w) % 2 == 0 && w_row_bytes % 2 == 0);
  if (n == 0) return;
  const int64_t per_step = format == RowFormat::kF32 ? 4 : 8;
  const bool vector_ok =
      reinterpret_cast<uintptr_t>(w) % 16 == 0 && w_row_bytes % 16 == 0 && k % per_step == 0;
  const auto blocks = static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock);
  gemv_kernel<<<blocks, kThreads, 0, stream>>>(format, static_cast<const uint8_t*>(w), w_row_bytes,
                                               x, y, n, k, bias, vector_ok);
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lm::kernels::cuda
