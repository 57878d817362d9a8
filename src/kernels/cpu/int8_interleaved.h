// The int8 GEMM over interleaved weight rows (interleaved_rows.h): one weight word holds the same
// 8 quant bytes of each of 8 weight rows, taken against the same 8 activations (broadcast), so a
// block of 32 is four words for 8 rows, and the int32 sums are scaled and accumulated once per
// block rather than per 64-element step. AVX-512 VNNI: one 512-bit vpdpbusd per word; AVX2:
// vpmaddubsw + vpmaddwd on each 256-bit half of it (int8_interleaved_avx2.cc), and the avx-vnni
// level one 256-bit vpdpbusd per half (the same file built again): the same integers and the same
// float operations, so the same bits. Per (weight row, activation row) the
// operations are the same whatever the number of activation rows in a tile, so a row's result
// does not depend on the batch it is in; decode (one activation row) and prefill share the
// kernel.
#pragma once

#include <cstdint>

#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {

// Bytes of one prepared activation row of k elements (k a multiple of 32): 64 per block.
inline constexpr int64_t int8_interleaved_row_bytes(int64_t k) { return k / 32 * 64; }

// dst (64-byte aligned) = the m rows of xq (xq_stride blocks apart) prepared for the GEMM
// (int8_interleaved_prepared.h: the same bytes for every ISA's GEMM, so the AVX2 preparation
// serves the VNNI table too).
void int8_interleaved_prepare_avx2(const BlockQ8Act* xq, int64_t xq_stride, int64_t m, int64_t k,
                                   void* dst);

// y[i * ldy + j] = dot(weight row j, activation row i) for i < m, j < n: w holds n interleaved
// rows (can_interleave(format, n, k)), x the m rows prepared by int8_interleaved_prepare_avx2.
// AVX-512 VNNI, AVX2, and the avx-vnni level in AVX-VNNI's VEX and AVX512-VNNI + VL's EVEX
// encodings (the same results).
void int8_interleaved_gemm_vnni(RowFormat format, const void* w, int64_t n, const void* x,
                                int64_t m, int64_t k, float* y, int64_t ldy);
void int8_interleaved_gemm_avx2(RowFormat format, const void* w, int64_t n, const void* x,
                                int64_t m, int64_t k, float* y, int64_t ldy);
void int8_interleaved_gemm_avx_vnni(RowFormat format, const void* w, int64_t n, const void* x,
                                    int64_t m, int64_t k, float* y, int64_t ldy);
void int8_interleaved_gemm_avx_vnni_evex(RowFormat format, const void* w, int64_t n, const void* x,
                                         int64_t m, int64_t k, float* y, int64_t ldy);

}  // namespace lm::kernels
