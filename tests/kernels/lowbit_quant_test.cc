// The low-bit row formats (Q2_K, Q3_K, IQ4_NL, IQ4_XS; lowbit_blocks.h): geometry, and every ISA's
// dequantizer, fp32 dot, int8 dot and matmul against the scalar reference on random blocks (the
// scalar dequantizer itself is pinned to gguf-py's, bit for bit, in kquant_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernel_test_util.h"
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/interleaved_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

using testing::random_floats;
using testing::random_kquant_rows;
using testing::supported_isas;

constexpr RowFormat kLowbit[] = {RowFormat::kQ2_K, RowFormat::kQ3_K, RowFormat::kIQ4_NL,
                                 RowFormat::kIQ4_XS};

std::string trace(RowFormat format, Isa isa) {
  return std::string(row_format_info(format).name) + " " + isa_name(isa);
}

TEST(LowbitQuant, GeometryMatchesGgml) {
  // gguf-py's GGML_QUANT_SIZES: Q2_K (256, 84), Q3_K (256, 110), IQ4_NL (32, 18), IQ4_XS (256,
  // 136).
  EXPECT_EQ(row_bytes(RowFormat::kQ2_K, 4096), 16 * 84);
  EXPECT_EQ(row_bytes(RowFormat::kQ3_K, 4096), 16 * 110);
  EXPECT_EQ(row_bytes(RowFormat::kIQ4_NL, 4096), 128 * 18);
  EXPECT_EQ(row_bytes(RowFormat::kIQ4_XS, 4096), 16 * 136);
  for (RowFormat f : kLowbit) {
    EXPECT_TRUE(is_lowbit(f));
    EXPECT_FALSE(is_kquant(f));
    EXPECT_TRUE(supports_int8_dot(f));
    // The int8 path stores them 8 rows at a time (int8_interleaved_test.cc).
    EXPECT_TRUE(can_interleave(f, 8, 256)) << "interleaved for the int8 GEMM";
  }
  EXPECT_FALSE(is_lowbit(RowFormat::kQ4_K));
  EXPECT_FALSE(is_lowbit(RowFormat::kQ4_0));
}

TEST(LowbitQuant, EveryIsaDequantizesToTheScalarBits) {
  constexpr int64_t k = 256 * 4;
  for (RowFormat format : kLowbit) {
    const auto row = random_kquant_rows(format, 1, k, 5);
    std::vector<float> expected(k);
    dequantize_row(format, row.data(), expected.data(), k, Isa::kScalar);
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(trace(format, isa));
      std::vector<float> got(k, -1.0f);
      dequantize_row(format, row.data(), got.data(), k, isa);
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(got[i], expected[i]) << "i=" << i;
    }
  }
}

TEST(LowbitQuant, FloatAndInt8DotsMatchTheScalarReferenceOnEveryIsa) {
  constexpr int64_t k = 256 * 6;
  for (RowFormat format : kLowbit) {
    const auto row = random_kquant_rows(format, 1, k, 11);
    std::vector<float> w(k);
    dequantize_row(format, row.data(), w.data(), k, Isa::kScalar);
    const auto x = random_floats(k, 12, -2.0f, 2.0f);
    std::vector<BlockQ8Act> xq(k / 32);
    quantize_row_q8_act(x.data(), xq.data(), k, Isa::kScalar);
    // What the int8 kernels compute exactly: dequantized weights times quantized activations.
    double exact_q8 = 0.0, abs_q8 = 0.0;
    for (int64_t i = 0; i < k; ++i) {
      const double term = static_cast<double>(w[i]) * xq[i / 32].qs[i % 32] * xq[i / 32].d;
      exact_q8 += term;
      abs_q8 += std::fabs(term);
    }
    const double exact = testing::dot_double(w.data(), x.data(), k);
    const double abs_sum = testing::abs_dot_double(w.data(), x.data(), k);
    ASSERT_GT(abs_sum, 1.0) << "degenerate row";
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(trace(format, isa));
      EXPECT_NEAR(dot_row(format, row.data(), x.data(), k, isa), exact, 2e-5 * abs_sum + 1e-6);
      EXPECT_NEAR(dot_row_q8(format, row.data(), xq.data(), k, isa), exact_q8,
                  2e-5 * abs_q8 + 1e-6);
    }
  }
}

TEST(LowbitQuant, MultiRowInt8DotEqualsSingleRowDotsBitForBit) {
  constexpr int64_t k = 256 * 3;
  constexpr int64_t stride = k / 32 + 2;  // activation rows padded: the stride is honoured
  const auto x = random_floats(9 * k, 31, -2.0f, 2.0f);
  std::vector<BlockQ8Act> xq(static_cast<size_t>(9 * stride));
  for (int64_t i = 0; i < 9; ++i) quantize_row_q8_act(x.data() + i * k, xq.data() + i * stride, k);
  for (RowFormat format : kLowbit) {
    const auto row = random_kquant_rows(format, 1, k, 32);
    for (Isa isa : supported_isas()) {
      for (int64_t m : {1, 4, 5}) {
        SCOPED_TRACE(trace(format, isa) + " m=" + std::to_string(m));
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

TEST(LowbitQuant, MatmulDecodeAndPrefillOnEveryIsaBothActivationPaths) {
  ThreadPool pool(2);
  constexpr int64_t k = 512, n = 9;
  for (RowFormat format : kLowbit) {
    const auto rows = random_kquant_rows(format, n, k, 21);
    const int64_t rb = row_bytes(format, k);
    std::vector<float> w(n * k);
    for (int64_t j = 0; j < n; ++j)
      dequantize_row(format, rows.data() + j * rb, w.data() + j * k, k, Isa::kScalar);
    for (int64_t m : {1, 5}) {
      const auto x = random_floats(m * k, 22);
      for (Isa isa : supported_isas()) {
        for (bool int8 : {false, true}) {
          SCOPED_TRACE(trace(format, isa) + " m=" + std::to_string(m) +
                       " int8=" + std::to_string(int8));
          std::vector<float> y(m * n, -1.0f);
          matmul(format, rows.data(), rb, x.data(), y.data(), m, n, k, pool, nullptr, isa, int8);
          for (int64_t i = 0; i < m; ++i) {
            const float* xi = x.data() + i * k;
            std::vector<BlockQ8Act> xq(k / 32);
            quantize_row_q8_act(xi, xq.data(), k, Isa::kScalar);
            for (int64_t j = 0; j < n; ++j) {
              const float* wj = w.data() + j * k;
              const double expected = testing::dot_double(xi, wj, k);
              double bound = 2e-5 * testing::abs_dot_double(xi, wj, k) + 1e-6;
              // int8 activations move each x by at most half a quantization step.
              for (int64_t t = 0; int8 && t < k; ++t) bound += std::fabs(wj[t]) * xq[t / 32].d / 2;
              EXPECT_NEAR(y[i * n + j], expected, bound) << i << "," << j;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace lm::kernels
