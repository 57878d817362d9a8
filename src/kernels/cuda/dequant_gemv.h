// One activation row times a weight matrix whose rows are stored in our row formats (GGML Q8_0,
// Q4_0, Q4_1 blocks; F16, BF16, F32), dequantized in registers: the decode-time linear layer,
// where reading the weights once is the whole cost. CPU twin: kernels::matmul with m = 1.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/row_format.h"

namespace lm::kernels::cuda {

// Whether dequant_gemv handles `format`.
bool gemv_supports(RowFormat format);

// y[j] = sum_i W[j, i] * x[i] (+ bias[j]) for j < n. w: n rows of k elements in `format`, row j at
// w + j * w_row_bytes (2-byte aligned; 16-byte aligned rows take the vector path for float
// formats). x: [k] fp32, 16-byte aligned; y: [n] fp32; bias: [n] or null. Accumulates in fp32.
void dequant_gemv(RowFormat format, const void* w, int64_t w_row_bytes, const float* x, float* y,
                  int64_t n, int64_t k, const float* bias, cudaStream_t stream);

}  // namespace lm::kernels::cuda
