// Shared helpers for the kernel tests: seeded random data and the list of ISAs to check.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include <cmath>

#include "base/fp16.h"
#include "kernels/cpu/int8_dot.h"
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
  for (Isa isa : kAllIsas) {
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

// Byte offsets of the fp16 block scales of a K-quant or low-bit format (GGML's layouts).
inline std::vector<int64_t> fp16_scale_fields(RowFormat format) {
  switch (format) {
    case RowFormat::kQ6_K:
      return {208};
    case RowFormat::kQ2_K:
      return {80, 82};
    case RowFormat::kQ3_K:
      return {108};
    case RowFormat::kIQ4_NL:
    case RowFormat::kIQ4_XS:
      return {0};
    default:
      return {0, 2};
  }
}

// n rows of k (a multiple of the block size) K-quant or low-bit weights: random bytes, so every
// nibble, high-bit and packed-scale pattern occurs, with the fp16 block scales set to small
// positive values.
inline std::vector<uint8_t> random_kquant_rows(RowFormat format, int64_t n, int64_t k,
                                               uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * row_bytes(format, k)));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  const int64_t block_bytes = row_format_info(format).block_bytes;
  for (size_t off = 0; off < bytes.size(); off += static_cast<size_t>(block_bytes)) {
    for (int64_t field : fp16_scale_fields(format)) {
      const uint16_t h = fp32_to_fp16(scale(rng));
      bytes[off + field] = static_cast<uint8_t>(h & 0xff);
      bytes[off + field + 1] = static_cast<uint8_t>(h >> 8);
    }
  }
  return bytes;
}

// n rows of k weights in `format`: random floats through GGML's quantizers for the block formats,
// random_kquant_rows for the K-quants and low-bit formats (no quantizer here).
inline std::vector<uint8_t> quantized_weight_rows(RowFormat format, int64_t n, int64_t k,
                                                  uint32_t seed) {
  if (is_kquant(format) || is_lowbit(format)) return random_kquant_rows(format, n, k, seed);
  const auto w = random_floats(n * k, seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * row_bytes(format, k)));
  for (int64_t j = 0; j < n; ++j) {
    uint8_t* row = bytes.data() + j * row_bytes(format, k);
    if (format == RowFormat::kQ8_0) quantize_row_q8_0(w.data() + j * k, row, k);
    if (format == RowFormat::kQ4_0) quantize_row_q4_0(w.data() + j * k, row, k);
    if (format == RowFormat::kQ4_1) quantize_row_q4_1(w.data() + j * k, row, k);
    if (format == RowFormat::kQ5_0) quantize_row_q5_0(w.data() + j * k, row, k);
    if (format == RowFormat::kQ5_1) quantize_row_q5_1(w.data() + j * k, row, k);
    if (format == RowFormat::kQ4_Z128) {
      // Each block shifted by its own offset, so its zero point takes every value in [0, 15].
      std::vector<float> shifted(w.begin() + j * k, w.begin() + (j + 1) * k);
      for (int64_t b = 0; b < k / 128; ++b) {
        const float shift = static_cast<float>((j * 7 + b * 5) % 17 - 8) / 8.0f;
        for (int64_t i = 0; i < 128; ++i) shifted[static_cast<size_t>(b * 128 + i)] += shift;
      }
      quantize_row_q4_z128(shifted.data(), row, k);
    }
  }
  return bytes;
}

// m rows of k random activations in [-3, 3] quantized to int8 blocks.
inline std::vector<BlockQ8Act> quantized_activation_rows(int64_t m, int64_t k, uint32_t seed) {
  const auto x = random_floats(m * k, seed, -3.0f, 3.0f);
  std::vector<BlockQ8Act> xq(static_cast<size_t>(m * k / 32));
  for (int64_t i = 0; i < m; ++i) quantize_row_q8_act(x.data() + i * k, xq.data() + i * k / 32, k);
  return xq;
}

// y[i * n + j] against the exact (double) sum of dequantized weight row j times the quantized
// activation row i, to 2e-5 of the sum of the terms' magnitudes.
inline void expect_exact_int8_math(RowFormat format, const std::vector<uint8_t>& w, int64_t n,
                                   const std::vector<BlockQ8Act>& xq, int64_t m, int64_t k,
                                   const std::vector<float>& y) {
  std::vector<float> deq(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    dequantize_row(format, w.data() + j * row_bytes(format, k), deq.data(), k, Isa::kScalar);
    for (int64_t i = 0; i < m; ++i) {
      double exact = 0.0, abs_sum = 0.0;
      for (int64_t t = 0; t < k; ++t) {
        const BlockQ8Act& b = xq[static_cast<size_t>((i * k + t) / 32)];
        const double term = static_cast<double>(deq[t]) * b.qs[t % 32] * b.d;
        exact += term;
        abs_sum += std::abs(term);
      }
      ASSERT_NEAR(y[i * n + j], exact, 2e-5 * abs_sum + 1e-6) << i << "," << j;
    }
  }
}

}  // namespace lm::kernels::testing
