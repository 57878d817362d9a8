// AVX2 FMA peak probe (built with -mavx2 -mfma; called only when cpuid says so): 10 independent
// accumulator chains cover the FMA latency (4-5 cycles) times two FMA ports.
#include "bench/machine_limits.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

namespace lm {

double fma_probe_avx2(int64_t iterations, float* sink) {
  constexpr int kChains = 10;
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 10
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  *sink += _mm_cvtss_f32(_mm256_castps256_ps128(sum));
  return static_cast<double>(iterations) * kChains * 8 * 2;
}

uint64_t read_probe_avx2(const uint64_t* words, int64_t count) {
  // Four 256-bit accumulators keep enough loads in flight to saturate memory, not the adders.
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
#pragma GCC unroll 4
    for (int a = 0; a < 4; ++a) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + i + 4 * a));
      acc[a] = _mm256_add_epi64(acc[a], v);
    }
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(
      reinterpret_cast<__m256i*>(lanes),
      _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3])));
  uint64_t sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < count; ++i) sum += words[i];
  return sum;
}

}  // namespace lm

#else  // not built for this ISA: never called (isa_supported is false)

namespace lm {
double fma_probe_avx2(int64_t, float*) { return 0; }
uint64_t read_probe_avx2(const uint64_t*, int64_t) { return 0; }
}  // namespace lm

#endif
