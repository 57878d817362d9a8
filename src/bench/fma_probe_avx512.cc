// AVX-512 FMA peak probe (built with -mavx512f; called only when cpuid says so).
#include "bench/machine_limits.h"

#if defined(__AVX512F__)

#include "bench/fma_probe.h"

namespace lm {

double fma_probe_avx512(int64_t iterations, float* sink) {
  return fma_probe::run<kernels::lanes::Zmm>(iterations, sink);
}

}  // namespace lm

#else  // not built for this ISA: never called (isa_supported is false)

namespace lm {
double fma_probe_avx512(int64_t, float*) { return 0; }
}  // namespace lm

#endif
