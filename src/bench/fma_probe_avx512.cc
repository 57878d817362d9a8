// AVX-512 FMA peak probe (built with -mavx512f; called only when cpuid says so).
#include "bench/machine_limits.h"

#if defined(__AVX512F__)

#include <immintrin.h>

namespace lm {

double fma_probe_avx512(int64_t iterations, float* sink) {
  constexpr int kChains = 10;
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999999f);
  const __m512 b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 10
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  // NOTE: not _mm512_reduce_add_ps: g++ 12's version trips -Werror=uninitialized.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  for (float lane : lanes) *sink += lane;
  return static_cast<double>(iterations) * kChains * 16 * 2;
}

}  // namespace lm

#else  // not built for this ISA: never called (isa_supported is false)

namespace lm {
double fma_probe_avx512(int64_t, float*) { return 0; }
}  // namespace lm

#endif
