// AVX2 K-quant kernels (built with -mavx2 -mfma -mf16c; used only after cpuid says so). Each
// group of 32 weights is unpacked to 32 unsigned bytes in one register, then either widened to
// fp32 (fp32 activations) or multiplied with int8 activations by maddubs (llama.cpp's approach).
// NOTE: as in kernels_avx2.cc, nothing here may instantiate inline functions or templates with
// external linkage: only internal-linkage helpers (kquant_blocks.h's are static) and intrinsics.
#include "kernels/cpu/kquants_avx2.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/avx2_block_unpack.h"
#include "kernels/cpu/kquant_blocks.h"

namespace lm::kernels {
namespace {

using avx2::hsum;
using avx2::load_f16;

__m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Byte-wise (v >> shift) & mask: the 16-bit shift drags bits across bytes, the mask drops them.
__m256i shift_mask(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}

// The 32 unsigned values of group g (see kquant::group_values_*), one per byte, in element order.
__m256i group_q4_k(const uint8_t* block, int g) {
  return shift_mask(load32(block + kquant::kQ4_KQsOffset + 32 * (g / 2)), (g % 2) * 4, 0x0f);
}

__m256i group_q5_k(const uint8_t* block, int g) {
  const __m256i low =
      shift_mask(load32(block + kquant::kQ5_KQsOffset + 32 * (g / 2)), (g % 2) * 4, 0x0f);
  const __m256i high = shift_mask(load32(block + kquant::kQ5_KQhOffset), g, 0x01);
  return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
}

__m256i group_q6_k(const uint8_t* block, int g) {
  const int half = g / 4;
  const int t = g % 4;
  const __m256i low = shift_mask(load32(block + 64 * half + 32 * (t & 1)), t >= 2 ? 4 : 0, 0x0f);
  const __m256i high = shift_mask(load32(block + kquant::kQ6_KQhOffset + 32 * half), 2 * t, 0x03);
  return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
}

__m256i group_values(RowFormat format, const uint8_t* block, int g) {
  if (format == RowFormat::kQ4_K) return group_q4_k(block, g);
  if (format == RowFormat::kQ5_K) return group_q5_k(block, g);
  return group_q6_k(block, g);
}

// 32 unsigned bytes as four vectors of 8 floats (elements 0-7, ..., 24-31).
struct GroupFloats {
  __m256 v[4];
};

GroupFloats to_floats(__m256i q) {
  const __m128i lo = _mm256_castsi256_si128(q);
  const __m128i hi = _mm256_extracti128_si256(q, 1);
  return {{_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)),
           _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))),
           _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)),
           _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)))}};
}

// Per-group multipliers of a super-block: value = scale[g] * q - min[g] (Q4_K/Q5_K), or
// scale[2g + h] * (q - 32) for each half h of group g (Q6_K, mins unused).
struct SuperBlockScales {
  float scale[16];
  float min[8];
};

SuperBlockScales scales_of(RowFormat format, const uint8_t* block) {
  SuperBlockScales s{};
  if (format == RowFormat::kQ6_K) {
    const float d = load_f16(block + kquant::kQ6_KDOffset);
    const auto* sc = reinterpret_cast<const int8_t*>(block + kquant::kQ6_KScalesOffset);
    for (int i = 0; i < 16; ++i) s.scale[i] = d * static_cast<float>(sc[i]);
    return s;
  }
  const float d = load_f16(block);
  const float dmin = load_f16(block + 2);
  uint8_t sc[8], mn[8];
  kquant::unpack_scales_k4(block + kquant::kScalesOffset, sc, mn);
  for (int g = 0; g < 8; ++g) {
    s.scale[g] = d * static_cast<float>(sc[g]);
    s.min[g] = dmin * static_cast<float>(mn[g]);
  }
  return s;
}

// Signed x signed 8-bit products summed into 8 int32 lanes (lane i covers bytes 4i..4i+3):
// x's sign moves onto y so maddubs sees |x| as unsigned.
__m256i dot_s8_s8(__m256i x, __m256i y) {
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

__m256i dot_u8_s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

}  // namespace

void dequantize_row_kquant_avx2(RowFormat format, const void* src, float* dst, int64_t k) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  const int64_t block_bytes = row_format_info(format).block_bytes;
  const __m256 offset = _mm256_set1_ps(32.0f);
  for (int64_t b = 0; b < k / 256; ++b) {
    const uint8_t* block = bytes + b * block_bytes;
    const SuperBlockScales s = scales_of(format, block);
    for (int g = 0; g < 8; ++g, dst += 32) {
      const GroupFloats q = to_floats(group_values(format, block, g));
      for (int i = 0; i < 4; ++i) {
        __m256 value;
        if (format == RowFormat::kQ6_K) {
          value =
              _mm256_mul_ps(_mm256_set1_ps(s.scale[2 * g + i / 2]), _mm256_sub_ps(q.v[i], offset));
        } else {
          value = _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(s.scale[g]), q.v[i]),
                                _mm256_set1_ps(s.min[g]));
        }
        _mm256_storeu_ps(dst + 8 * i, value);
      }
    }
  }
}

float dot_row_kquant_avx2(RowFormat format, const void* row, const float* x, int64_t k) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  const int64_t block_bytes = row_format_info(format).block_bytes;
  const __m256 offset = _mm256_set1_ps(32.0f);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / 256; ++b) {
    const uint8_t* block = bytes + b * block_bytes;
    const SuperBlockScales s = scales_of(format, block);
    for (int g = 0; g < 8; ++g, x += 32) {
      const GroupFloats q = to_floats(group_values(format, block, g));
      const __m256 x0 = _mm256_loadu_ps(x);
      const __m256 x1 = _mm256_loadu_ps(x + 8);
      const __m256 x2 = _mm256_loadu_ps(x + 16);
      const __m256 x3 = _mm256_loadu_ps(x + 24);
      if (format == RowFormat::kQ6_K) {
        // Each half of the group has its own scale.
        const __m256 first = _mm256_fmadd_ps(_mm256_sub_ps(q.v[1], offset), x1,
                                             _mm256_mul_ps(_mm256_sub_ps(q.v[0], offset), x0));
        const __m256 second = _mm256_fmadd_ps(_mm256_sub_ps(q.v[3], offset), x3,
                                              _mm256_mul_ps(_mm256_sub_ps(q.v[2], offset), x2));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(s.scale[2 * g]), first, acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(s.scale[2 * g + 1]), second, acc);
        continue;
      }
      // sum((scale * q - min) * x) = scale * sum(q * x) - min * sum(x).
      __m256 qx = _mm256_mul_ps(q.v[0], x0);
      qx = _mm256_fmadd_ps(q.v[1], x1, qx);
      qx = _mm256_fmadd_ps(q.v[2], x2, qx);
      qx = _mm256_fmadd_ps(q.v[3], x3, qx);
      const __m256 sx = _mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(s.scale[g]), qx, acc);
      acc = _mm256_fnmadd_ps(_mm256_set1_ps(s.min[g]), sx, acc);
    }
  }
  return hsum(acc);
}

namespace {

// One K-quant format's int8 dots of one weight row against MR activation rows (xq_stride blocks
// apart): F is a template argument and the group loop is unrolled, so the group's shifts are
// immediates and the eight scales stay in registers. Each group of 32 weights is unpacked once
// for all MR rows (prefill: before, once per row; unpacking was most of the work); each row's
// sums run in the same order as alone (super-block, then group), so a row's result is the same
// bits whatever MR.
template <RowFormat F, int MR>
void dot_rows_q8_kquant(const uint8_t* bytes, const BlockQ8Act* xq, int64_t xq_stride, int64_t k,
                        float* out, int64_t out_stride) {
  constexpr int64_t kBlockBytes = F == RowFormat::kQ4_K   ? kquant::kQ4_KBytes
                                  : F == RowFormat::kQ5_K ? kquant::kQ5_KBytes
                                                          : kquant::kQ6_KBytes;
  __m256 acc[MR];
  float offsets[MR];
  for (int i = 0; i < MR; ++i) {
    acc[i] = _mm256_setzero_ps();
    offsets[i] = 0.0f;
  }
  for (int64_t b = 0; b < k / 256; ++b) {
    const uint8_t* block = bytes + b * kBlockBytes;
    const BlockQ8Act* a = xq + b * 8;
    if constexpr (F == RowFormat::kQ6_K) {
      const float d = load_f16(block + kquant::kQ6_KDOffset);
      const auto* sc = reinterpret_cast<const int8_t*>(block + kquant::kQ6_KScalesOffset);
      const __m256i thirty_two = _mm256_set1_epi8(32);
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m256i w = _mm256_sub_epi8(group_q6_k(block, g), thirty_two);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
          const BlockQ8Act& ai = a[i * xq_stride + g];
          const __m256i dot =
              dot_s8_s8(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ai.qs)));
          // Lanes 0-3 hold the first 16 products, lanes 4-7 the second: one scale each.
          const float da = d * ai.d;
          const __m256 scale =
              _mm256_setr_m128(_mm_set1_ps(da * static_cast<float>(sc[2 * g])),
                               _mm_set1_ps(da * static_cast<float>(sc[2 * g + 1])));
          acc[i] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), acc[i]);
        }
      }
    } else {
      const float d = load_f16(block);
      const float dmin = load_f16(block + 2);
      uint8_t sc[8], mn[8];
      kquant::unpack_scales_k4(block + kquant::kScalesOffset, sc, mn);
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m256i q = F == RowFormat::kQ4_K ? group_q4_k(block, g) : group_q5_k(block, g);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
          const BlockQ8Act& ai = a[i * xq_stride + g];
          const __m256i dot =
              dot_u8_s8(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ai.qs)));
          acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d * static_cast<float>(sc[g]) * ai.d),
                                   _mm256_cvtepi32_ps(dot), acc[i]);
          offsets[i] += dmin * static_cast<float>(mn[g]) * ai.s;
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i) out[i * out_stride] = hsum(acc[i]) - offsets[i];
}

// m rows, 8 at a time, then 4, then one.
template <RowFormat F>
void dot_rows_q8_kquant_format(const uint8_t* bytes, const BlockQ8Act* xq, int64_t xq_stride,
                               int64_t m, int64_t k, float* out, int64_t out_stride) {
  int64_t i = 0;
  for (; i + 8 <= m; i += 8)
    dot_rows_q8_kquant<F, 8>(bytes, xq + i * xq_stride, xq_stride, k, out + i * out_stride,
                             out_stride);
  for (; i + 4 <= m; i += 4)
    dot_rows_q8_kquant<F, 4>(bytes, xq + i * xq_stride, xq_stride, k, out + i * out_stride,
                             out_stride);
  for (; i < m; ++i)
    dot_rows_q8_kquant<F, 1>(bytes, xq + i * xq_stride, xq_stride, k, out + i * out_stride,
                             out_stride);
}

}  // namespace

void dot_rows_q8_kquant_avx2(RowFormat format, const void* row, const BlockQ8Act* xq,
                             int64_t xq_stride, int64_t m, int64_t k, float* out,
                             int64_t out_stride) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  if (format == RowFormat::kQ4_K) {
    dot_rows_q8_kquant_format<RowFormat::kQ4_K>(bytes, xq, xq_stride, m, k, out, out_stride);
  } else if (format == RowFormat::kQ5_K) {
    dot_rows_q8_kquant_format<RowFormat::kQ5_K>(bytes, xq, xq_stride, m, k, out, out_stride);
  } else {
    dot_rows_q8_kquant_format<RowFormat::kQ6_K>(bytes, xq, xq_stride, m, k, out, out_stride);
  }
}

float dot_row_q8_kquant_avx2(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k) {
  float out = 0.0f;  // one row is the multi-row kernel with m = 1: the same sums, bit for bit
  dot_rows_q8_kquant_avx2(format, row, xq, 0, 1, k, &out, 1);
  return out;
}

}  // namespace lm::kernels

#endif
