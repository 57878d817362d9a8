// Weight rows interleaved eight at a time, the layout the interleaved int8 GEMM (AVX2 and AVX-512
// VNNI) reads for decode and prefill (int8_interleaved.h). A group of 8 rows takes exactly the
// bytes of those 8 rows in their GGML format, block by block: for each block
// (Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL: 32 elements; Q4_Z128: 128; Q4_K/Q5_K/Q6_K/Q2_K/Q3_K/IQ4_XS:
// 256), each field
// of the block is stored for all 8 rows together, cut into words:
//   Q4_0  d: 8 x 2 B | qs: 2 words of 8 B x 8 rows               (144 B)
//   Q4_1  d: 8 x 2 B | m: 8 x 2 B | qs: 2 words x 8 rows x 8 B   (160 B)
//   Q8_0  d: 8 x 2 B | qs: 4 words x 8 rows x 8 B                (272 B)
//   Q5_0  d: 8 x 2 B | qh: 4 words of 1 B x 8 rows | qs: 2 words x 8 rows x 8 B   (176 B)
//   Q5_1  d: 8 x 2 B | m: 8 x 2 B | qh: 4 x 8 x 1 B | qs: 2 words x 8 rows x 8 B (192 B)
//   Q4_K  d: 8 x 2 B | dmin: 8 x 2 B | scales: 3 words x 8 rows x 4 B | qs: 16 words x 8 rows x 8 B
//   Q5_K  as Q4_K with qh: 4 words x 8 rows x 8 B between scales and qs      (1408 B)
//   Q6_K  d: 8 x 2 B | scales: 8 words (pairs) x 8 rows x 2 B | then per half h of 128 elements:
//         ql words 8h..8h+3, qh words 4h..4h+3, ql words 8h+4..8h+7 (each x 8 rows x 8 B)
//         (1680 B; the order the kernel reads, so that a super-block streams forwards)
//   IQ4_NL as Q4_0                                                           (144 B)
//   IQ4_XS d: 8 x 2 B | scales_h: 8 x 2 B | scales_l: 8 x 4 B | qs: 16 words x 8 rows x 8 B
//   Q3_K   d: 8 x 2 B | scales: 3 words x 8 rows x 4 B | hmask: 4 words x 8 rows x 8 B |
//          qs: 8 words x 8 rows x 8 B                                        (880 B)
//   Q2_K   d: 8 x 2 B | dmin: 8 x 2 B | scales: 8 words (a group's pair) x 8 rows x 2 B |
//          qs: 8 words x 8 rows x 8 B                                        (672 B)
//   Q4_Z128 (blocks of 128) d: 8 x 2 B | z: 8 x 1 B | unused: 8 x 1 B |
//          qs: 8 words x 8 rows x 8 B (words 2j, 2j + 1: sub-block j, as Q4_0's)  (544 B)
// so one 64-byte load is the same 8 quant bytes of each of the 8 rows (one activation broadcast
// serves 8 rows), and a block's 8 scales are one 16-byte load.
// Group g (rows 8g..8g+7) starts at g * 8 * row_bytes(format, k).
#pragma once

#include <cstdint>

#include "kernels/cpu/row_format.h"

namespace lm::kernels {

inline constexpr int64_t kInterleavedRows = 8;

// True when n rows of k elements in `format` have an interleaved layout: Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS and Q4_Z128, n a multiple of 8, k a multiple
// of the block size.
bool can_interleave(RowFormat format, int64_t n, int64_t k);

// dst (n * row_bytes(format, k) bytes) = the n rows at src (row j at src + j * src_row_bytes)
// interleaved. Requires can_interleave.
void interleave_rows(RowFormat format, const void* src, int64_t src_row_bytes, int64_t n, int64_t k,
                     void* dst);

// The inverse: row j of the interleaved rows at src, in its GGML layout, to dst.
void deinterleave_row(RowFormat format, const void* src, int64_t j, int64_t k, void* dst);

}  // namespace lm::kernels
