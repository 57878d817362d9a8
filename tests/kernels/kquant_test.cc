// K-quant row formats (Q4_K, Q5_K, Q6_K): the scalar dequantizer against gguf-py's (fixture from
// scripts/fixtures/make_quant_block_references.py, which also pins Q5_0, Q5_1 and the low-bit
// Q2_K, Q3_K, IQ4_NL, IQ4_XS, those bit for bit; lowbit_quant_test.cc has their kernels), and every
// ISA's dequantizer, fp32 dot, int8 dot and matmul against the scalar reference on random
// super-blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kernel_test_util.h"
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

using testing::random_floats;
using testing::random_kquant_rows;
using testing::supported_isas;

constexpr RowFormat kKquants[] = {RowFormat::kQ4_K, RowFormat::kQ5_K, RowFormat::kQ6_K};

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

RowFormat format_named(const std::string& name) {
  for (RowFormat f :
       {RowFormat::kQ5_0, RowFormat::kQ5_1, RowFormat::kQ4_K, RowFormat::kQ5_K, RowFormat::kQ6_K,
        RowFormat::kQ2_K, RowFormat::kQ3_K, RowFormat::kIQ4_NL, RowFormat::kIQ4_XS}) {
    if (name == row_format_info(f).name) return f;
  }
  ADD_FAILURE() << "unknown format " << name;
  return RowFormat::kQ4_K;
}

TEST(Kquant, GeometryMatchesGgml) {
  EXPECT_EQ(row_bytes(RowFormat::kQ4_K, 4096), 16 * 144);
  EXPECT_EQ(row_bytes(RowFormat::kQ5_K, 4096), 16 * 176);
  EXPECT_EQ(row_bytes(RowFormat::kQ6_K, 4096), 16 * 210);
  for (RowFormat f : kKquants) {
    EXPECT_TRUE(is_kquant(f));
    EXPECT_TRUE(supports_int8_dot(f));
  }
  EXPECT_FALSE(is_kquant(RowFormat::kQ4_1));
}

TEST(Kquant, DequantizeMatchesGgufPyOnEveryIsaIncludingQ5) {
  std::ifstream in(LM_REPO_ROOT "/tests/fixtures/quant_blocks/gguf_py_blocks.json");
  ASSERT_TRUE(in) << "missing fixture";
  const auto fixture = nlohmann::json::parse(in);
  int checked = 0, lowbit_checked = 0;
  for (const auto& c : fixture["cases"]) {
    const RowFormat format = format_named(c["format"]);
    const auto blocks = from_hex(c["blocks_hex"]);
    const auto expected = c["values"].get<std::vector<float>>();
    const auto k = static_cast<int64_t>(expected.size());
    ASSERT_EQ(static_cast<int64_t>(blocks.size()), row_bytes(format, k));
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(std::string(row_format_info(format).name) + " " + isa_name(isa));
      std::vector<float> got(expected.size());
      dequantize_row(format, blocks.data(), got.data(), k, isa);
      for (int64_t i = 0; i < k; ++i) {
        if (is_lowbit(format)) {
          // Same operations in the same order as gguf-py's (lowbit_blocks.h): the same bits.
          ASSERT_EQ(got[i], expected[i]) << "i=" << i;
        } else {
          // gguf-py rounds the same products in a different order: allow a few ulps.
          ASSERT_NEAR(got[i], expected[i], 1e-6f + 4e-7f * std::fabs(expected[i])) << "i=" << i;
        }
      }
      ++checked;
      lowbit_checked += is_lowbit(format);
    }
  }
  EXPECT_GE(checked, 9);
  EXPECT_GE(lowbit_checked, 4);
  std::cout << "[ measured ] Q5_0/Q5_1/K-quant/low-bit dequantization == gguf-py ("
            << fixture["generator"] << ") on " << checked << " format x ISA cases\n";
}

TEST(Kquant, FloatAndInt8DotsMatchTheScalarReferenceOnEveryIsa) {
  constexpr int64_t k = 256 * 6;
  for (RowFormat format : kKquants) {
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
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(std::string(row_format_info(format).name) + " " + isa_name(isa));
      EXPECT_NEAR(dot_row(format, row.data(), x.data(), k, isa), exact, 2e-5 * abs_sum + 1e-6);
      EXPECT_NEAR(dot_row_q8(format, row.data(), xq.data(), k, isa), exact_q8,
                  2e-5 * abs_q8 + 1e-6);
      std::vector<float> deq(k);
      dequantize_row(format, row.data(), deq.data(), k, isa);
      for (int64_t i = 0; i < k; ++i) ASSERT_NEAR(deq[i], w[i], 1e-6f + 4e-7f * std::fabs(w[i]));
    }
  }
}

TEST(Kquant, MatmulDecodeAndPrefillOnEveryIsaBothActivationPaths) {
  ThreadPool pool(2);
  constexpr int64_t k = 512, n = 9;
  for (RowFormat format : kKquants) {
    const auto rows = random_kquant_rows(format, n, k, 21);
    const int64_t rb = row_bytes(format, k);
    std::vector<float> w(n * k);
    for (int64_t j = 0; j < n; ++j)
      dequantize_row(format, rows.data() + j * rb, w.data() + j * k, k, Isa::kScalar);
    for (int64_t m : {1, 5}) {
      const auto x = random_floats(m * k, 22);
      for (Isa isa : supported_isas()) {
        for (bool int8 : {false, true}) {
          SCOPED_TRACE(std::string(row_format_info(format).name) + " " + isa_name(isa) +
                       " m=" + std::to_string(m) + " int8=" + std::to_string(int8));
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
