// AVX2 int8 activation path (built with -mavx2 -mfma -mf16c; used only after cpuid says so): the
// activation quantizer, and the block-format dots of int8_block_rows.h with maddubs + madd to
// int32. NOTE: as in kernels_avx2.cc, nothing here may instantiate inline functions or templates
// with external linkage (std::, base/fp16.h): only internal-linkage helpers and intrinsics.
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/kquants_avx2.h"
#include "kernels/cpu/lowbit_quants_avx2.h"
#include "kernels/cpu/q4_z128_blocks.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/int8_block_rows.h"

namespace lm::kernels {
namespace {

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
  if (format == RowFormat::kQ4_Z128) return dot_row_q8_q4_z128(row, xq, k);
  float out = 0.0f;  // one row is the multi-row kernel with m = 1: the same sums, bit for bit
  dot_rows_q8_avx2(format, row, xq, 0, 1, k, &out, 1);
  return out;
}

namespace {

// u8 x s8 products into 8 int32 lanes with AVX2: maddubs to int16 pairs, madd to int32.
struct MaddubsDot {
  static __m256i apply(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
};

}  // namespace

void dot_rows_q8_avx2(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t xq_stride,
                      int64_t m, int64_t k, float* out, int64_t out_stride) {
  // Q4_Z128 rows run interleaved where the AVX2 GEMM is; rows that cannot be (a row count not a
  // multiple of 8) take the scalar definition.
  if (format == RowFormat::kQ4_Z128) {
    dot_rows_q8_scalar(format, row, xq, xq_stride, m, k, out, out_stride);
    return;
  }
  if (avx2::dot_rows_block_format<MaddubsDot>(format, row, xq, xq_stride, m, k, out, out_stride))
    return;
  if (is_lowbit(format)) {
    dot_rows_q8_lowbit_avx2(format, row, xq, xq_stride, m, k, out, out_stride);
    return;
  }
  dot_rows_q8_kquant_avx2(format, row, xq, xq_stride, m, k, out, out_stride);
}

}  // namespace lm::kernels

#endif
