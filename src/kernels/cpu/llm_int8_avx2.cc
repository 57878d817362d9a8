// Eight activations at a time: the fp16 round trip by F16C (round to nearest even, as the
// scalar fp32_to_fp16; a NaN stays a NaN, which neither path lets past), the outlier test, the
// absmax (vmaxps keeps its second operand when the first is NaN: NaNs are skipped, as by the
// scalar std::max), then round(a * factor) half to even by vroundps after the clamp.
#include "kernels/cpu/llm_int8_avx2.h"

#include "base/check.h"
#include "kernels/cpu/llm_int8.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

namespace lm::kernels {

bool llm_int8_avx2_built() { return true; }

void quantize_activation_row_avx2(const float* xr, int64_t k, BlockQ8Act* blocks,
                                  std::vector<int32_t>& column, std::vector<float>& value,
                                  float* row) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 threshold = _mm256_set1_ps(kLlmInt8Threshold);
  __m256 absmax8 = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; i += 8) {
    const __m256 a = _mm256_cvtph_ps(
        _mm256_cvtps_ph(_mm256_loadu_ps(xr + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256 mag = _mm256_andnot_ps(sign, a);
    const __m256 outlier = _mm256_cmp_ps(mag, threshold, _CMP_GE_OQ);  // false for NaN
    if (int bits = _mm256_movemask_ps(outlier); bits != 0) {
      for (; bits != 0; bits &= bits - 1) {
        const int lane = __builtin_ctz(static_cast<unsigned>(bits));
        column.push_back(static_cast<int32_t>(i + lane));
        value.push_back(xr[i + lane]);
      }
    }
    _mm256_storeu_ps(row + i, _mm256_andnot_ps(outlier, a));  // outliers zeroed
    absmax8 = _mm256_max_ps(_mm256_andnot_ps(outlier, mag), absmax8);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, absmax8);
  float absmax = 0.0f;
  for (const float m : lanes) absmax = absmax < m ? m : absmax;
  const float f = absmax == 0.0f ? 0.0f : (1.0f / absmax) * 127.0f;  // as the scalar factor()
  const float d = absmax * (6.200124e-05f * 127.0f);
  const __m256 factor = _mm256_set1_ps(f);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (int64_t b = 0; b < k / kQuantBlockSize; ++b) {
    __m256i q32[4];
    for (int j = 0; j < 4; ++j) {
      const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(row + b * kQuantBlockSize + 8 * j), factor);
      const __m256 is_number = _mm256_cmp_ps(p, p, _CMP_ORD_Q);
      const __m256 clamped = _mm256_min_ps(_mm256_max_ps(p, lo), hi);
      const __m256 rounded =
          _mm256_round_ps(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q32[j] = _mm256_cvtps_epi32(_mm256_and_ps(rounded, is_number));  // NaN -> 0
    }
    int32_t sum = 0;
    alignas(32) int32_t ints[8];
    for (int j = 0; j < 4; ++j) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(ints), q32[j]);
      for (int t = 0; t < 8; ++t) {
        blocks[b].qs[8 * j + t] = static_cast<int8_t>(ints[t]);
        sum += ints[t];
      }
    }
    blocks[b].d = d;
    blocks[b].s = d * static_cast<float>(sum);
  }
}

}  // namespace lm::kernels

#else

namespace lm::kernels {

bool llm_int8_avx2_built() { return false; }

void quantize_activation_row_avx2(const float*, int64_t, BlockQ8Act*, std::vector<int32_t>&,
                                  std::vector<float>&, float*) {
  LM_CHECK_MSG(false, "built without AVX2");
}

}  // namespace lm::kernels

#endif
