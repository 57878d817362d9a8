// BF16 weights for AVX512_BF16's pair dot (vdpbf16ps), which multiplies bf16 by bf16 two values
// of k at a time at twice the rate of fp32 FMAs. Layout: pair panels of kPanel16Rows rows, k-major
// in pairs of k: step q holds, for each of the 16 rows c, its values 2q and 2q + 1 side by side
// (32 bf16: one 512-bit register whose 32-bit lane c is row c's pair), so one pair dot against a
// broadcast pair of activations advances all 16 rows' chains by two values of k.
// Activations are rounded to bf16 (round to nearest even), as llama.cpp rounds them for BF16
// weights; this is the int8-activation mode's path (--int8-activations, on by default) on CPUs
// with AVX512_BF16, so --int8-activations false keeps BF16 models on fp32 activations.
// NOTE: every output is one chain over the pairs q in order from 0, each step what vdpbf16ps
// does to a lane (Intel's definition, checked bit for bit on AMD Zen 4): acc + x[2q+1] w[2q+1]
// rounded to fp32, then + x[2q] w[2q] rounded (products exact, round to nearest even, inputs
// below fp32's normal range read as zero and results there flushed to zero). The scalar reference
// computes it with two FMAs, and a row's result is the same bits alone or in any batch, split or
// blocked over k in any way.
#pragma once

#include <cstdint>

#include "kernels/cpu/row_format.h"

namespace lm::kernels {

// True for BF16 matrices of n rows (a multiple of kPanel16Rows, panels16.h) of an even k > 0.
bool can_bf16_pairs(RowFormat format, int64_t n, int64_t k);

// Panel g holds rows [16 g, 16 g + 16): row 16 g + c's value p at dst[g * 16 k + (p / 2) * 32 +
// 2 c + p % 2] (bf16, n * k values, the rows' own size). src: n rows of k bf16 values, row j at
// src + j * src_row_bytes. dst may be src (in place) when src_row_bytes == 2 k.
void pack_bf16_pairs(const void* src, int64_t src_row_bytes, int64_t n, int64_t k, void* dst);

// Row `row`'s values as fp32 from pair panels of k-element rows.
void bf16_pairs_row(const void* panels, int64_t k, int64_t row, float* dst);

// dst[q] = x[2q] rounded to bf16 in the low half, x[2q + 1] in the high half, for q < k / 2 (k
// even): an activation row as the pair dot reads it.
void bf16_pairs_of(const float* x, int64_t k, uint32_t* dst);

// The scalar reference of IsaKernels::bf16_pair_gemm (its contract is there).
void bf16_pair_gemm_scalar(const uint32_t* x, int64_t ldx, int64_t m, const void* panels,
                           int64_t num_panels, int64_t k, int64_t q0, int64_t q1, float* y,
                           int64_t ldy, bool accumulate);

}  // namespace lm::kernels
