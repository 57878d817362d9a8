// AVX2 inner loops for the K-quant row formats (Q4_K, Q5_K, Q6_K), called from the AVX2 entries of
// the IsaKernels table; the scalar reference lives in kernels_scalar.cc and int8_dot.cc.
#pragma once

#include <cstdint>

#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {

void dequantize_row_kquant_avx2(RowFormat format, const void* src, float* dst, int64_t k);
float dot_row_kquant_avx2(RowFormat format, const void* row, const float* x, int64_t k);
float dot_row_q8_kquant_avx2(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k);
// out[i * out_stride] = dot_row_q8_kquant_avx2(format, row, xq + i * xq_stride, k) for i < m, bit
// for bit, each group of weights unpacked once for all m rows.
void dot_rows_q8_kquant_avx2(RowFormat format, const void* row, const BlockQ8Act* xq,
                             int64_t xq_stride, int64_t m, int64_t k, float* out,
                             int64_t out_stride);

}  // namespace lm::kernels
