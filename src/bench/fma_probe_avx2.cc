// AVX2 probes (built with -mavx2 -mfma; called only when cpuid says so): the FMA peak on 8 lanes
// (fma_probe.h) and the memory read loop.
#include "bench/machine_limits.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include "bench/fma_probe.h"

namespace lm {

double fma_probe_avx2(int64_t iterations, float* sink) {
  return fma_probe::run<kernels::lanes::Ymm>(iterations, sink);
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
