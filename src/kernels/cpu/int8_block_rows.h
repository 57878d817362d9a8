// The multi-row int8 dot over GGML's 32-element block formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1),
// shared by the AVX2 and AVX-512 VNNI tables, which differ only in the instruction that multiplies
// 32 unsigned weight bytes by 32 signed activation bytes into 8 int32 lanes (the Dot policy:
// maddubs + madd, or vpdpbusd). Each weight block is unpacked once for up to 4 activation rows,
// and a row's sum does not depend on how rows are grouped (batch invariance).
// Include only from files built with -mavx2 or wider. NOTE: everything here has internal linkage
// (static), for the reason kernels_avx2.cc gives.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/avx2_block_unpack.h"
#include "kernels/cpu/int8_dot.h"

namespace lm::kernels::avx2 {

// R activation rows against one weight row in format F. Signed weights: the unsigned operand is
// |w| (computed once) and w's sign moves onto each x.
template <RowFormat F, int R, typename Dot>
static void dot_block_rows(const uint8_t* row, const BlockQ8Act* xq, int64_t xq_stride,
                           int64_t num_blocks, float* out, int64_t out_stride) {
  constexpr bool kSigned = F == RowFormat::kQ8_0 || F == RowFormat::kQ4_0 || F == RowFormat::kQ5_0;
  constexpr bool kOffset = F == RowFormat::kQ4_1 || F == RowFormat::kQ5_1;
  constexpr int64_t kBytes = F == RowFormat::kQ8_0   ? 34
                             : F == RowFormat::kQ4_0 ? 18
                             : F == RowFormat::kQ4_1 ? 20
                             : F == RowFormat::kQ5_0 ? 22
                                                     : 24;
  __m256 acc[R];
  float offsets[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    offsets[r] = 0.0f;
  }
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = row + b * kBytes;
    __m256i w;
    if constexpr (F == RowFormat::kQ8_0) {
      w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    } else if constexpr (F == RowFormat::kQ4_0) {
      w = _mm256_sub_epi8(nibbles_to_bytes(block + 2), _mm256_set1_epi8(8));
    } else if constexpr (F == RowFormat::kQ4_1) {
      w = nibbles_to_bytes(block + 4);
    } else if constexpr (F == RowFormat::kQ5_0) {
      w = _mm256_sub_epi8(q5_to_bytes(block + 2, block + 6), _mm256_set1_epi8(16));
    } else {
      w = q5_to_bytes(block + 4, block + 8);
    }
    const float d = load_f16(block);
    const __m256i w_abs = kSigned ? _mm256_sign_epi8(w, w) : w;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const BlockQ8Act& a = xq[r * xq_stride + b];
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
      const __m256i x = kSigned ? _mm256_sign_epi8(q, w) : q;
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * a.d), _mm256_cvtepi32_ps(Dot::apply(w_abs, x)),
                               acc[r]);
      if constexpr (kOffset) offsets[r] += load_f16(block + 2) * a.s;
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_stride] = hsum(acc[r]) + offsets[r];
}

template <RowFormat F, typename Dot>
static void dot_block_rows_in_fours(const uint8_t* row, const BlockQ8Act* xq, int64_t xq_stride,
                                    int64_t m, int64_t num_blocks, float* out, int64_t out_stride) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    dot_block_rows<F, 4, Dot>(row, xq + i * xq_stride, xq_stride, num_blocks, out + i * out_stride,
                              out_stride);
  }
  for (; i < m; ++i) {
    dot_block_rows<F, 1, Dot>(row, xq + i * xq_stride, xq_stride, num_blocks, out + i * out_stride,
                              out_stride);
  }
}

// out[i * out_stride] for i < m when `format` is a 32-element block format; false otherwise
// (the K-quants have their own kernels).
template <typename Dot>
static bool dot_rows_block_format(RowFormat format, const void* row, const BlockQ8Act* xq,
                                  int64_t xq_stride, int64_t m, int64_t k, float* out,
                                  int64_t out_stride) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  const int64_t nb = k / 32;
  switch (format) {
    case RowFormat::kQ8_0:
      dot_block_rows_in_fours<RowFormat::kQ8_0, Dot>(bytes, xq, xq_stride, m, nb, out, out_stride);
      return true;
    case RowFormat::kQ4_0:
      dot_block_rows_in_fours<RowFormat::kQ4_0, Dot>(bytes, xq, xq_stride, m, nb, out, out_stride);
      return true;
    case RowFormat::kQ4_1:
      dot_block_rows_in_fours<RowFormat::kQ4_1, Dot>(bytes, xq, xq_stride, m, nb, out, out_stride);
      return true;
    case RowFormat::kQ5_0:
      dot_block_rows_in_fours<RowFormat::kQ5_0, Dot>(bytes, xq, xq_stride, m, nb, out, out_stride);
      return true;
    case RowFormat::kQ5_1:
      dot_block_rows_in_fours<RowFormat::kQ5_1, Dot>(bytes, xq, xq_stride, m, nb, out, out_stride);
      return true;
    default:
      return false;
  }
}

}  // namespace lm::kernels::avx2
