// 16-bit weights (F16, BF16) in panels: kPanel16Rows consecutive rows stored k-major, so a step
// over k reads one contiguous run of 16 values, one per row, that converts to one register of
// fp32 lanes (two of 8 on AVX2) with no horizontal sums left at the end. The layout, its packing
// from rows, and the scalar references of the kernels (isa.h: panel16_dot, panel16_unpack,
// panel16_gemm; panel16_direct_gemm's is panel16_dot's; the vector ones are lanes/panels16.h).
// NOTE: every output is one fp32 FMA chain over k in order (fma(x[p], w[p], acc), from 0), in
// every kernel, table and tile, so a row's result is the same bits alone or in any batch, split
// or blocked over k in any way, and at every ISA level.
#pragma once

#include <cstdint>

#include "kernels/cpu/row_format.h"

namespace lm::kernels {

inline constexpr int64_t kPanel16Rows = 16;

// How far ahead a decode GEMV prefetches a panel it streams from DRAM (the 16-bit panels' dot,
// lanes/panels16.h, and the BF16 pair panels', bf16_pairs_avx512.cc): one panel's few FMA chains
// leave the out-of-order window too short to keep enough lines in flight. SmolLM2 F16 decode at
// 2 threads gained 8-14% (2 KiB: less, 8 KiB: less and noisier).
inline constexpr int64_t kPanelStreamPrefetchBytes = 4096;

// Panels a one-row decode GEMV streams side by side (lanes/panels16.h: one stream held a core
// below its memory bandwidth), so the panels a decode call's threads claim at a time.
inline constexpr int64_t kPanel16DecodePanels = 4;
// Panels of fewer values of k than this stream one at a time, prefetched, whatever the rows:
// SmolLM2's (k = 576 and 1536) decoded ~6% slower side by side (F16 at avx512-bf16, 10
// alternating pairs), 7B's (4096, 11008) 10-20% faster.
inline constexpr int64_t kPanel16SideBySideMinDepth = 2048;

// True for F16 and BF16 matrices of n rows (a multiple of kPanel16Rows) of k > 0 elements.
bool can_panel16(RowFormat format, int64_t n, int64_t k);

// Panel g holds rows [16 g, 16 g + 16): element (p, c), row 16 g + c's p-th value, at
// dst[(g * k + p) * 16 + c] (16-bit values, n * k in all, the rows' own size). src: n rows of k
// values, row j at src + j * src_row_bytes. dst may be src (in place) when src_row_bytes == 2 k.
void pack_panels16(RowFormat format, const void* src, int64_t src_row_bytes, int64_t n, int64_t k,
                   void* dst);

// Row `row`'s values as fp32 from panels of k-element rows (a lookup, e.g. an embedding row).
void panel16_row(RowFormat format, const void* panels, int64_t k, int64_t row, float* dst);

// The scalar references (their contracts are IsaKernels'):
void panel16_dot_scalar(RowFormat format, const void* panels, int64_t num_panels, int64_t k,
                        const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy);
void panel16_unpack_scalar(RowFormat format, const void* panel, int64_t p0, int64_t p1, float* dst);
void panel16_gemm_scalar(const float* x, int64_t ldx, int64_t m, const float* panels,
                         int64_t num_panels, int64_t k, float* y, int64_t ldy, bool accumulate);

}  // namespace lm::kernels
