// Shared helpers for the kernel tests: seeded random data and the list of ISAs to check.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/row_format.h"

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
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Vnni}) {
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

// n rows of k (a multiple of 256) K-quant weights: random bytes, so every nibble, high-bit and
// packed-scale pattern occurs, with the fp16 super-block scales set to small positive values.
inline std::vector<uint8_t> random_kquant_rows(RowFormat format, int64_t n, int64_t k,
                                               uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * row_bytes(format, k)));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  const int64_t block_bytes = row_format_info(format).block_bytes;
  for (size_t off = 0; off < bytes.size(); off += static_cast<size_t>(block_bytes)) {
    for (int64_t field :
         format == RowFormat::kQ6_K ? std::vector<int64_t>{208} : std::vector<int64_t>{0, 2}) {
      const uint16_t h = fp32_to_fp16(scale(rng));
      bytes[off + field] = static_cast<uint8_t>(h & 0xff);
      bytes[off + field + 1] = static_cast<uint8_t>(h >> 8);
    }
  }
  return bytes;
}

}  // namespace lm::kernels::testing
