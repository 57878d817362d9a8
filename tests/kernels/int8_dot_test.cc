// The int8 activation path: the quantizer is bit-identical on every ISA, each integer dot matches
// the exact integer math of the scalar reference up to fp32 rounding and the fp32-activation dot
// within the activation rounding bound, and matmul with quantize_activations agrees with both.
#include "kernels/cpu/int8_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <string>

#include "base/fp16.h"
#include "kernel_test_util.h"
#include "kernels/cpu/matmul.h"

namespace lm::kernels {
namespace {

using testing::random_floats;
using testing::supported_isas;

constexpr RowFormat kInt8Formats[] = {RowFormat::kQ8_0, RowFormat::kQ4_0, RowFormat::kQ4_1,
                                      RowFormat::kQ5_0, RowFormat::kQ5_1};

std::vector<uint8_t> quantize_weights(RowFormat format, const std::vector<float>& w, int64_t n,
                                      int64_t k) {
  std::vector<uint8_t> bytes(static_cast<size_t>(n * row_bytes(format, k)));
  for (int64_t j = 0; j < n; ++j) {
    uint8_t* row = bytes.data() + j * row_bytes(format, k);
    const float* src = w.data() + j * k;
    if (format == RowFormat::kQ8_0) quantize_row_q8_0(src, row, k);
    if (format == RowFormat::kQ4_0) quantize_row_q4_0(src, row, k);
    if (format == RowFormat::kQ4_1) quantize_row_q4_1(src, row, k);
    if (format == RowFormat::kQ5_0) quantize_row_q5_0(src, row, k);
    if (format == RowFormat::kQ5_1) quantize_row_q5_1(src, row, k);
  }
  return bytes;
}

std::vector<BlockQ8Act> quantize_act(const float* x, int64_t k, Isa isa) {
  std::vector<BlockQ8Act> xq(static_cast<size_t>(k / 32));
  quantize_row_q8_act(x, xq.data(), k, isa);
  return xq;
}

// The dot in double from the dequantized weights and the quantized activations: what the integer
// kernels compute exactly, before their fp32 rounding. Also returns sum |w_i * xq_i|.
double exact_dot(RowFormat format, const void* row, const std::vector<BlockQ8Act>& xq, int64_t k,
                 double* abs_sum) {
  std::vector<float> w(static_cast<size_t>(k));
  dequantize_row(format, row, w.data(), k, Isa::kScalar);
  double sum = 0.0;
  *abs_sum = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    const BlockQ8Act& b = xq[static_cast<size_t>(i / 32)];
    const double term = static_cast<double>(w[i]) * b.qs[i % 32] * b.d;
    sum += term;
    *abs_sum += std::abs(term);
  }
  return sum;
}

// Bound on |dot with fp32 x - dot with quantized x|: each activation moves by at most d / 2.
double activation_rounding_bound(RowFormat format, const void* row,
                                 const std::vector<BlockQ8Act>& xq, int64_t k) {
  std::vector<float> w(static_cast<size_t>(k));
  dequantize_row(format, row, w.data(), k, Isa::kScalar);
  double bound = 0.0;
  for (int64_t i = 0; i < k; ++i) bound += std::abs(w[i]) * xq[static_cast<size_t>(i / 32)].d / 2;
  return bound;
}

TEST(Int8Dot, QuantizerIsIdenticalOnEveryIsaAndWithinHalfAStep) {
  constexpr int64_t k = 32 * 40;
  auto x = random_floats(k, 7, -3.0f, 3.0f);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(32 + i)] = 0.0f;  // an all-zero block
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(64 + i)] = 0.5f * static_cast<float>(i - 16);
  x[64 + 31] = 127.0f;  // d = 1: the half-integers above are exact rounding ties
  const auto ref = quantize_act(x.data(), k, Isa::kScalar);
  EXPECT_EQ(ref[1].d, 0.0f);
  EXPECT_EQ(ref[2].qs[1], -8);  // -7.5 rounds half to even
  EXPECT_EQ(ref[2].qs[3], -6);  // -6.5 too
  for (int64_t b = 0; b < k / 32; ++b) {
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      const BlockQ8Act& blk = ref[static_cast<size_t>(b)];
      sum += blk.qs[i];
      EXPECT_LE(std::abs(blk.qs[i] * blk.d - x[static_cast<size_t>(b * 32 + i)]),
                blk.d * 0.5f * 1.0001f);
    }
    EXPECT_FLOAT_EQ(ref[static_cast<size_t>(b)].s, ref[static_cast<size_t>(b)].d * sum);
  }
  for (Isa isa : supported_isas()) {
    const auto got = quantize_act(x.data(), k, isa);
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(BlockQ8Act)), 0)
        << isa_name(isa);
  }
}

TEST(Int8Dot, EveryFormatAndIsaMatchesExactIntegerMathAndTheFloatDot) {
  for (RowFormat format : kInt8Formats) {
    double worst_ratio = 0.0;  // |int8 - fp32 dot| / activation rounding bound
    for (int64_t k : {32, 64, 576, 1536, 4096 + 32}) {
      constexpr int64_t n = 9;
      const auto w = random_floats(n * k, 11 + static_cast<uint32_t>(k));
      const auto bytes = quantize_weights(format, w, n, k);
      const auto x = random_floats(k, 13 + static_cast<uint32_t>(k), -2.0f, 2.0f);
      const auto xq = quantize_act(x.data(), k, Isa::kScalar);
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t* row = bytes.data() + j * row_bytes(format, k);
        double abs_sum = 0.0;
        const double exact = exact_dot(format, row, xq, k, &abs_sum);
        const double float_dot = dot_row(format, row, x.data(), k, Isa::kScalar);
        const double bound = activation_rounding_bound(format, row, xq, k);
        for (Isa isa : supported_isas()) {
          SCOPED_TRACE(std::string(row_format_info(format).name) + " " + isa_name(isa) +
                       " k=" + std::to_string(k) + " row=" + std::to_string(j));
          const float got = dot_row_q8(format, row, xq.data(), k, isa);
          EXPECT_NEAR(got, exact, 1e-5 * abs_sum + 1e-6);
          EXPECT_NEAR(got, float_dot, bound + 1e-5 * abs_sum + 1e-6);
          worst_ratio = std::max(worst_ratio, std::abs(got - float_dot) / bound);
        }
      }
    }
    std::cout << "[ measured ] " << row_format_info(format).name
              << " int8 vs fp32-activation dot: worst |diff| / rounding bound = " << worst_ratio
              << "\n";
  }
}

TEST(Int8Dot, MatmulWithQuantizedActivationsMatchesTheDotsAndTheFloatPath) {
  ThreadPool pool(2);
  ThreadPool single(1);
  for (Isa isa : supported_isas()) {
    for (RowFormat format : kInt8Formats) {
      for (int64_t m : {1, 3, 17}) {
        for (int64_t k : {32, 576}) {
          constexpr int64_t n = 33;
          SCOPED_TRACE(std::string(row_format_info(format).name) + " " + isa_name(isa) +
                       " m=" + std::to_string(m) + " k=" + std::to_string(k));
          const auto w = random_floats(n * k, 21);
          const auto bytes = quantize_weights(format, w, n, k);
          const auto x = random_floats(m * k, 23 + static_cast<uint32_t>(m));
          const auto bias = random_floats(n, 25);
          std::vector<float> y_int8(static_cast<size_t>(m * n)), y_f32(y_int8.size());
          const int64_t rb = row_bytes(format, k);
          matmul(format, bytes.data(), rb, x.data(), y_int8.data(), m, n, k, m == 3 ? single : pool,
                 bias.data(), isa, /*quantize_activations=*/true);
          matmul(format, bytes.data(), rb, x.data(), y_f32.data(), m, n, k, pool, bias.data(), isa);
          for (int64_t i = 0; i < m; ++i) {
            const auto xq = quantize_act(x.data() + i * k, k, isa);
            for (int64_t j = 0; j < n; ++j) {
              const uint8_t* row = bytes.data() + j * rb;
              const float got = y_int8[static_cast<size_t>(i * n + j)];
              EXPECT_EQ(got, dot_row_q8(format, row, xq.data(), k, isa) + bias[j]);
              double abs_sum = 0.0;
              exact_dot(format, row, xq, k, &abs_sum);
              EXPECT_NEAR(got, y_f32[static_cast<size_t>(i * n + j)],
                          activation_rounding_bound(format, row, xq, k) + 2e-5 * abs_sum + 1e-5);
            }
          }
        }
      }
    }
  }
}

TEST(Int8Dot, FloatFormatsIgnoreTheOption) {
  ThreadPool pool(2);
  constexpr int64_t m = 3, n = 5, k = 64;
  const auto w = random_floats(n * k, 31);
  const auto x = random_floats(m * k, 33);
  std::vector<float> a(m * n), b(m * n);
  matmul(RowFormat::kF32, w.data(), k * 4, x.data(), a.data(), m, n, k, pool, nullptr, best_isa(),
         true);
  matmul(RowFormat::kF32, w.data(), k * 4, x.data(), b.data(), m, n, k, pool);
  EXPECT_EQ(a, b);
}

TEST(Int8Dot, MultiRowDotEqualsSingleRowDotsBitForBit) {
  constexpr int64_t k = 256 * 3;
  constexpr int64_t stride = k / 32 + 2;  // activation rows padded: the stride is honoured
  constexpr int64_t rows = 13;            // the most any case below reads
  const auto x = random_floats(rows * k, 31, -2.0f, 2.0f);
  std::vector<BlockQ8Act> xq(static_cast<size_t>(rows * stride));
  for (int64_t i = 0; i < rows; ++i)
    quantize_row_q8_act(x.data() + i * k, xq.data() + i * stride, k);
  std::vector<RowFormat> formats(std::begin(kInt8Formats), std::end(kInt8Formats));
  formats.push_back(RowFormat::kQ4_K);
  formats.push_back(RowFormat::kQ5_K);
  formats.push_back(RowFormat::kQ6_K);
  for (RowFormat format : formats) {
    const auto row = is_kquant(format) ? testing::random_kquant_rows(format, 1, k, 32)
                                       : quantize_weights(format, random_floats(k, 33), 1, k);
    for (Isa isa : supported_isas()) {
      for (int64_t m : {1, 3, 4, 5, 9, 13}) {
        SCOPED_TRACE(std::string(row_format_info(format).name) + " " + isa_name(isa) +
                     " m=" + std::to_string(m));
        std::vector<float> out(static_cast<size_t>(2 * m), -1.0f);
        dot_rows_q8(format, row.data(), xq.data(), stride, m, k, out.data(), 2, isa);
        for (int64_t i = 0; i < m; ++i) {
          EXPECT_EQ(out[2 * i], dot_row_q8(format, row.data(), xq.data() + i * stride, k, isa));
          EXPECT_EQ(out[2 * i + 1], -1.0f);  // out_stride honoured
        }
      }
    }
  }
}

}  // namespace
}  // namespace lm::kernels
