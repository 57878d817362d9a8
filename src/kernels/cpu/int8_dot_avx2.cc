// AVX2 int8 activation path (built with -mavx2 -mfma -mf16c; used only after cpuid says so):
// llama.cpp's ggml_vec_dot_{q8_0,q4_0,q4_1}_q8 inner loops, _mm256_maddubs_epi16 + madd to int32.
// NOTE: as in kernels_avx2.cc, nothing here may instantiate inline functions or templates with
// external linkage (std::, base/fp16.h): only internal-linkage helpers and intrinsics.
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/kquants_avx2.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/avx2_block_unpack.h"

namespace lm::kernels {
namespace {

using avx2::nibbles_to_bytes;

float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// Eight int32 partial sums of u[i] * s[i] (u unsigned, s signed; pairs fit int16 for our ranges).
__m256i dot_u8_s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// Signed x signed: move x's sign onto y so maddubs sees |x| as unsigned.
__m256i dot_s8_s8(__m256i x, __m256i y) {
  return dot_u8_s8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

__m256i load_qs(const BlockQ8Act& a) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
}

}  // namespace

void quantize_row_q8_act_avx2(const float* x, BlockQ8Act* dst, int64_t k) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    __m256 v0 = _mm256_loadu_ps(x);
    __m256 v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16);
    __m256 v3 = _mm256_loadu_ps(x + 24);
    const __m256 amax = _mm256_max_ps(
        _mm256_max_ps(_mm256_andnot_ps(sign_bit, v0), _mm256_andnot_ps(sign_bit, v1)),
        _mm256_max_ps(_mm256_andnot_ps(sign_bit, v2), _mm256_andnot_ps(sign_bit, v3)));
    const float d = hmax(amax) / 127.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), kRound));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), kRound));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), kRound));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), kRound));
    const int32_t sum =
        hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
    // Packing interleaves the 128-bit lanes; the permute restores element order.
    i0 = _mm256_packs_epi32(i0, i1);
    i2 = _mm256_packs_epi32(i2, i3);
    i0 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(i0, i2), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst[b].qs), i0);
    dst[b].d = d;
    dst[b].s = d * static_cast<float>(sum);
  }
}

float dot_row_q8_avx2(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k) {
  if (is_kquant(format)) return dot_row_q8_kquant_avx2(format, row, xq, k);
  const auto* bytes = static_cast<const uint8_t*>(row);
  const int64_t num_blocks = k / 32;
  __m256 acc = _mm256_setzero_ps();
  if (format == RowFormat::kQ8_0) {
    for (int64_t b = 0; b < num_blocks; ++b) {
      const uint8_t* block = bytes + b * 34;
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
      const __m256 dot = _mm256_cvtepi32_ps(dot_s8_s8(w, load_qs(xq[b])));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(block) * xq[b].d), dot, acc);
    }
    return hsum(acc);
  }
  if (format == RowFormat::kQ4_0) {
    const __m256i eight = _mm256_set1_epi8(8);
    for (int64_t b = 0; b < num_blocks; ++b) {
      const uint8_t* block = bytes + b * 18;
      const __m256i w = _mm256_sub_epi8(nibbles_to_bytes(block + 2), eight);
      const __m256 dot = _mm256_cvtepi32_ps(dot_s8_s8(w, load_qs(xq[b])));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(block) * xq[b].d), dot, acc);
    }
    return hsum(acc);
  }
  if (format == RowFormat::kQ5_0) {
    const __m256i sixteen = _mm256_set1_epi8(16);
    for (int64_t b = 0; b < num_blocks; ++b) {
      const uint8_t* block = bytes + b * 22;
      const __m256i w = _mm256_sub_epi8(avx2::q5_to_bytes(block + 2, block + 6), sixteen);
      const __m256 dot = _mm256_cvtepi32_ps(dot_s8_s8(w, load_qs(xq[b])));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(block) * xq[b].d), dot, acc);
    }
    return hsum(acc);
  }
  if (format == RowFormat::kQ5_1) {
    float offsets = 0.0f;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const uint8_t* block = bytes + b * 24;
      const __m256i w = avx2::q5_to_bytes(block + 4, block + 8);
      const __m256 dot = _mm256_cvtepi32_ps(dot_u8_s8(w, load_qs(xq[b])));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(block) * xq[b].d), dot, acc);
      offsets += load_f16(block + 2) * xq[b].s;
    }
    return hsum(acc) + offsets;
  }
  // Q4_1: nibbles are already unsigned; the offset m contributes m * (d_x * sum(q_x)).
  float offsets = 0.0f;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = bytes + b * 20;
    const __m256 dot = _mm256_cvtepi32_ps(dot_u8_s8(nibbles_to_bytes(block + 4), load_qs(xq[b])));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(block) * xq[b].d), dot, acc);
    offsets += load_f16(block + 2) * xq[b].s;
  }
  return hsum(acc) + offsets;
}

namespace {

// R activation rows against one weight row in format F (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1): each
// weight block is unpacked once and reused for the R rows, whose sums come out exactly as R calls
// of dot_row_q8_avx2 would compute them.
template <RowFormat F, int R>
void dot_rows_block_format(const uint8_t* row, const BlockQ8Act* xq, int64_t xq_stride,
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
      w = _mm256_sub_epi8(avx2::q5_to_bytes(block + 2, block + 6), _mm256_set1_epi8(16));
    } else {
      w = avx2::q5_to_bytes(block + 4, block + 8);
    }
    const float d = load_f16(block);
    // Signed weights: maddubs needs an unsigned operand, so |w| once and w's sign on each x.
    const __m256i w_abs = kSigned ? _mm256_sign_epi8(w, w) : w;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const BlockQ8Act& a = xq[r * xq_stride + b];
      const __m256i q = load_qs(a);
      const __m256i x = kSigned ? _mm256_sign_epi8(q, w) : q;
      const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, x), _mm256_set1_epi16(1));
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * a.d), _mm256_cvtepi32_ps(dot), acc[r]);
      if constexpr (kOffset) offsets[r] += load_f16(block + 2) * a.s;
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_stride] = hsum(acc[r]) + offsets[r];
}

template <RowFormat F>
void dot_rows_format(const uint8_t* row, const BlockQ8Act* xq, int64_t xq_stride, int64_t m,
                     int64_t num_blocks, float* out, int64_t out_stride) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    dot_rows_block_format<F, 4>(row, xq + i * xq_stride, xq_stride, num_blocks,
                                out + i * out_stride, out_stride);
  }
  for (; i < m; ++i) {
    dot_rows_block_format<F, 1>(row, xq + i * xq_stride, xq_stride, num_blocks,
                                out + i * out_stride, out_stride);
  }
}

}  // namespace

void dot_rows_q8_avx2(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t xq_stride,
                      int64_t m, int64_t k, float* out, int64_t out_stride) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  const int64_t nb = k / 32;
  switch (format) {
    case RowFormat::kQ8_0:
      return dot_rows_format<RowFormat::kQ8_0>(bytes, xq, xq_stride, m, nb, out, out_stride);
    case RowFormat::kQ4_0:
      return dot_rows_format<RowFormat::kQ4_0>(bytes, xq, xq_stride, m, nb, out, out_stride);
    case RowFormat::kQ4_1:
      return dot_rows_format<RowFormat::kQ4_1>(bytes, xq, xq_stride, m, nb, out, out_stride);
    case RowFormat::kQ5_0:
      return dot_rows_format<RowFormat::kQ5_0>(bytes, xq, xq_stride, m, nb, out, out_stride);
    case RowFormat::kQ5_1:
      return dot_rows_format<RowFormat::kQ5_1>(bytes, xq, xq_stride, m, nb, out, out_stride);
    default:  // K-quants: one row at a time for now.
      for (int64_t i = 0; i < m; ++i)
        out[i * out_stride] = dot_row_q8_avx2(format, row, xq + i * xq_stride, k);
  }
}

}  // namespace lm::kernels

#endif
