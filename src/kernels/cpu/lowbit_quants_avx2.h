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
float dot_row_q8_lowbit_avx2(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k);

}  // namespace lm::kernels
