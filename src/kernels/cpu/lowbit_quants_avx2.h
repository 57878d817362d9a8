// AVX2 loops for the low-bit row formats (Q2_K, Q3_K, IQ4_NL, IQ4_XS; lowbit_blocks.h), called
// from the AVX2 entries of the IsaKernels table; the scalar reference lives in kernels_scalar.cc
// and int8_dot.cc.
#pragma once

#include <cstdint>

#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {

void dequantize_row_lowbit_avx2(RowFormat format, const void* src, float* dst, int64_t k);
float dot_row_lowbit_avx2(RowFormat format, const void* row, const float* x, int64_t k);
// out[i * out_stride] = the int8 dot of the row with xq + i * xq_stride, for i < m (int8_dot.h's
// dot_rows_q8; each group is decoded once per 4 activation rows).
void dot_rows_q8_lowbit_avx2(RowFormat format, const void* row, const BlockQ8Act* xq,
                             int64_t xq_stride, int64_t m, int64_t k, float* out,
                             int64_t out_stride);

}  // namespace lm::kernels
