// AVX2 low-bit kernels (built with -mavx2 -mfma -mf16c; used only after cpuid says so). Each
// group of 32 weights is decoded to 32 int8 values in one register (Q2_K / Q3_K: shifts and masks;
// IQ4: pshufb into the 16 levels), then either widened to fp32 (fp32 activations) or multiplied
// with int8 activations by maddubs, as llama.cpp does. The dequantizer gives the scalar (and
// gguf-py's) bits even where the compiler fuses (d * sc) * q - m into one FMA: the product is exact
// in fp32 (lowbit_blocks.h), so only the subtraction rounds, once either way.
// NOTE: as in kernels_avx2.cc, nothing here may instantiate inline functions or templates with
// external linkage: only internal-linkage helpers (lowbit_blocks.h's are static) and intrinsics.
#include "kernels/cpu/lowbit_quants_avx2.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/avx2_block_unpack.h"
#include "kernels/cpu/lowbit_blocks.h"

namespace lm::kernels {
namespace {

using avx2::hsum;

__m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Byte-wise (v >> shift) & mask: the 16-bit shift drags bits across bytes, the mask drops them.
__m256i shift_mask(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}

template <RowFormat F>
constexpr int64_t kBlockBytes = F == RowFormat::kQ2_K     ? lowbit::kQ2_KBytes
                                : F == RowFormat::kQ3_K   ? lowbit::kQ3_KBytes
                                : F == RowFormat::kIQ4_NL ? lowbit::kIQ4_NLBytes
                                                          : lowbit::kIQ4_XSBytes;

// Group g's 32 int8 values in element order (lowbit::decode_group's q).
template <RowFormat F>
__m256i group_values(const uint8_t* block, int g) {
  if constexpr (F == RowFormat::kQ2_K) {
    return shift_mask(load32(block + lowbit::kQ2_KQsOffset + 32 * (g / 4)), 2 * (g % 4), 3);
  } else if constexpr (F == RowFormat::kQ3_K) {
    const __m256i low =
        shift_mask(load32(block + lowbit::kQ3_KQsOffset + 32 * (g / 4)), 2 * (g % 4), 3);
    const __m256i high = shift_mask(load32(block), g, 1);  // hmask: bit g of byte l
    return _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(high, 2)), _mm256_set1_epi8(4));
  } else {
    const uint8_t* qs = F == RowFormat::kIQ4_XS ? block + lowbit::kIQ4_XSQsOffset + 16 * g
                                                : block + lowbit::kIQ4_NLQsOffset;
    const __m256i levels = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(lowbit::kIq4Values)));
    return _mm256_shuffle_epi8(levels, avx2::nibbles_to_bytes(qs));
  }
}

// Group g's integer scale and min of each half of 16 (lowbit::decode_group's sc and mn).
// Always inlined: as a call (GCC's choice for Q3_K) the scales went through memory and the Q3_K
// int8 dot ran ~5x slower than Q2_K's.
template <RowFormat F>
[[gnu::always_inline]] inline void group_scales(const uint8_t* block, int g, int32_t sc[2],
                                                int32_t mn[2]) {
  mn[0] = mn[1] = 0;
  if constexpr (F == RowFormat::kQ2_K) {
    for (int h = 0; h < 2; ++h) {
      sc[h] = block[2 * g + h] & 15;
      mn[h] = block[2 * g + h] >> 4;
    }
  } else if constexpr (F == RowFormat::kQ3_K) {
    for (int h = 0; h < 2; ++h)
      sc[h] = lowbit::q3_k_scale(block + lowbit::kQ3_KScalesOffset, 2 * g + h);
  } else if constexpr (F == RowFormat::kIQ4_XS) {
    sc[0] = sc[1] = lowbit::iq4_xs_scale(block, g);
  } else {
    sc[0] = sc[1] = 1;
  }
}

// Group g as four vectors of 8 floats (elements 0-7, ..., 24-31): (d * sc) * q - (dmin * mn).
template <RowFormat F>
void group_floats(const uint8_t* block, int g, float d, float dmin, __m256 out[4]) {
  int32_t sc[2], mn[2];
  group_scales<F>(block, g, sc, mn);
  const __m256i q = group_values<F>(block, g);
  const __m128i lo = _mm256_castsi256_si128(q);
  const __m128i hi = _mm256_extracti128_si256(q, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int i = 0; i < 4; ++i) {
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[i]));
    const __m256 scale = _mm256_set1_ps(d * static_cast<float>(sc[i / 2]));
    const __m256 min = _mm256_set1_ps(dmin * static_cast<float>(mn[i / 2]));
    out[i] = _mm256_sub_ps(_mm256_mul_ps(scale, v), min);
  }
}

template <RowFormat F>
float block_d(const uint8_t* block) {
  return _cvtsh_ss(lowbit::d_bits(F, block));
}

template <RowFormat F>
float block_dmin(const uint8_t* block) {
  return _cvtsh_ss(lowbit::dmin_bits(F, block));
}

template <RowFormat F>
void dequantize_row(const uint8_t* bytes, float* dst, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = bytes + b * kBlockBytes<F>;
    const float d = block_d<F>(block), dmin = block_dmin<F>(block);
    for (int g = 0; g < lowbit::groups_per_block(F); ++g, dst += 32) {
      __m256 v[4];
      group_floats<F>(block, g, d, dmin, v);
      for (int i = 0; i < 4; ++i) _mm256_storeu_ps(dst + 8 * i, v[i]);
    }
  }
}

template <RowFormat F>
float dot_row(const uint8_t* bytes, const float* x, int64_t blocks) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = bytes + b * kBlockBytes<F>;
    const float d = block_d<F>(block), dmin = block_dmin<F>(block);
    for (int g = 0; g < lowbit::groups_per_block(F); ++g, x += 32) {
      __m256 v[4];
      group_floats<F>(block, g, d, dmin, v);
      for (int i = 0; i < 4; ++i) acc = _mm256_fmadd_ps(v[i], _mm256_loadu_ps(x + 8 * i), acc);
    }
  }
  return hsum(acc);
}

__m256i dot_u8_s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// R activation rows against one weight row: each group is decoded once for all R. Per group and
// row: int32 lanes of q . x times each half's scale (exact), one fp32 multiply-add; Q2_K also the
// lanes of sum(x) times each half's min, into a second accumulator. A row's sums do not depend on
// R (the multi-row dot equals single-row dots bit for bit).
template <RowFormat F, int R>
void dot_rows_q8(const uint8_t* bytes, const BlockQ8Act* xq, int64_t xq_stride, int64_t blocks,
                 float* out, int64_t out_stride) {
  constexpr int kGroups = lowbit::groups_per_block(F);
  constexpr bool kMins = F == RowFormat::kQ2_K;
  __m256 acc[R], acc_min[R];
  for (int r = 0; r < R; ++r) acc[r] = acc_min[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = bytes + b * kBlockBytes<F>;
    const float d = block_d<F>(block), dmin = block_dmin<F>(block);
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) {
      const __m256i q = group_values<F>(block, g);
      // Signed values: maddubs takes |q| as the unsigned operand and q's sign moves onto x.
      const __m256i q_abs = kMins ? q : _mm256_sign_epi8(q, q);
      int32_t sc[2], mn[2];
      group_scales<F>(block, g, sc, mn);
      const __m256i scales =
          _mm256_setr_epi32(sc[0], sc[0], sc[0], sc[0], sc[1], sc[1], sc[1], sc[1]);
      const __m256i mins =
          _mm256_setr_epi32(mn[0], mn[0], mn[0], mn[0], mn[1], mn[1], mn[1], mn[1]);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const BlockQ8Act& a = xq[r * xq_stride + b * kGroups + g];
        const __m256i x = load32(reinterpret_cast<const uint8_t*>(a.qs));
        // Lanes 0-3: the first half of 16, lanes 4-7: the second.
        const __m256i dot = dot_u8_s8(q_abs, kMins ? x : _mm256_sign_epi8(x, q));
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * a.d),
                                 _mm256_cvtepi32_ps(_mm256_mullo_epi32(dot, scales)), acc[r]);
        if constexpr (kMins) {
          const __m256i sums = dot_u8_s8(_mm256_set1_epi8(1), x);
          acc_min[r] =
              _mm256_fmadd_ps(_mm256_set1_ps(dmin * a.d),
                              _mm256_cvtepi32_ps(_mm256_mullo_epi32(sums, mins)), acc_min[r]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_stride] = hsum(acc[r]) - hsum(acc_min[r]);
}

template <RowFormat F>
void dot_rows_q8_in_fours(const uint8_t* bytes, const BlockQ8Act* xq, int64_t xq_stride, int64_t m,
                          int64_t blocks, float* out, int64_t out_stride) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    dot_rows_q8<F, 4>(bytes, xq + i * xq_stride, xq_stride, blocks, out + i * out_stride,
                      out_stride);
  }
  for (; i < m; ++i)
    dot_rows_q8<F, 1>(bytes, xq + i * xq_stride, xq_stride, blocks, out + i * out_stride,
                      out_stride);
}

}  // namespace

void dequantize_row_lowbit_avx2(RowFormat format, const void* src, float* dst, int64_t k) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  const int64_t blocks = k / row_format_info(format).block_size;
  switch (format) {
    case RowFormat::kQ2_K:
      return dequantize_row<RowFormat::kQ2_K>(bytes, dst, blocks);
    case RowFormat::kQ3_K:
      return dequantize_row<RowFormat::kQ3_K>(bytes, dst, blocks);
    case RowFormat::kIQ4_NL:
      return dequantize_row<RowFormat::kIQ4_NL>(bytes, dst, blocks);
    default:
      return dequantize_row<RowFormat::kIQ4_XS>(bytes, dst, blocks);
  }
}

float dot_row_lowbit_avx2(RowFormat format, const void* row, const float* x, int64_t k) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  const int64_t blocks = k / row_format_info(format).block_size;
  switch (format) {
    case RowFormat::kQ2_K:
      return dot_row<RowFormat::kQ2_K>(bytes, x, blocks);
    case RowFormat::kQ3_K:
      return dot_row<RowFormat::kQ3_K>(bytes, x, blocks);
    case RowFormat::kIQ4_NL:
      return dot_row<RowFormat::kIQ4_NL>(bytes, x, blocks);
    default:
      return dot_row<RowFormat::kIQ4_XS>(bytes, x, blocks);
  }
}

void dot_rows_q8_lowbit_avx2(RowFormat format, const void* row, const BlockQ8Act* xq,
                             int64_t xq_stride, int64_t m, int64_t k, float* out,
                             int64_t out_stride) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  const int64_t blocks = k / row_format_info(format).block_size;
  switch (format) {
    case RowFormat::kQ2_K:
      return dot_rows_q8_in_fours<RowFormat::kQ2_K>(bytes, xq, xq_stride, m, blocks, out,
                                                    out_stride);
    case RowFormat::kQ3_K:
      return dot_rows_q8_in_fours<RowFormat::kQ3_K>(bytes, xq, xq_stride, m, blocks, out,
                                                    out_stride);
    case RowFormat::kIQ4_NL:
      return dot_rows_q8_in_fours<RowFormat::kIQ4_NL>(bytes, xq, xq_stride, m, blocks, out,
                                                      out_stride);
    default:
      return dot_rows_q8_in_fours<RowFormat::kIQ4_XS>(bytes, xq, xq_stride, m, blocks, out,
                                                      out_stride);
  }
}

}  // namespace lm::kernels

#endif
