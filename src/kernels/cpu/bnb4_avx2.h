// AVX2 inner loops for bitsandbytes' NF4 / FP4 rows (bnb4_blocks.h), called from the AVX2 entries
// of the IsaKernels table; the scalar reference is kernels_scalar.cc's.
#pragma once

#include <cstdint>

#include "kernels/cpu/row_format.h"

namespace lm::kernels {

// Bit for bit the scalar values (code[q] * absmax).
void dequantize_row_bnb4_avx2(RowFormat format, const void* src, float* dst, int64_t k);
float dot_row_bnb4_avx2(RowFormat format, const void* row, const float* x, int64_t k);

}  // namespace lm::kernels
