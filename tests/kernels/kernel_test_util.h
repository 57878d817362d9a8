// Shared helpers for the kernel tests: seeded random data and the list of ISAs to check.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"

namespace lm::kernels::testing {

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// Every variant this CPU can run, scalar reference first.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

inline double dot_double(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

inline double abs_dot_double(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::abs(static_cast<double>(a[i]) * b[i]);
  return sum;
}

}  // namespace lm::kernels::testing
