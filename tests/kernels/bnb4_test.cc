// bitsandbytes' NF4 / FP4 rows against bitsandbytes itself: the committed rows quantized by its
// quantize_4bit (scripts/fixtures/make_bnb4_references.py) give the same bytes and absmax from our
// quantizer, and every ISA dequantizes them to bitsandbytes' fp32 values bit for bit; the dots
// and the matmul over such rows (fp32 activations: no int8 path) agree with those values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/cpu/bnb4_blocks.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

using Json = nlohmann::json;

Json fixture() {
  std::ifstream in(std::string(LM_REPO_ROOT) + "/tests/fixtures/quant_blocks/bnb4.json");
  return Json::parse(in);
}

RowFormat format_of(const std::string& quant_type) {
  return quant_type == "nf4" ? RowFormat::kNF4 : RowFormat::kFP4;
}

std::vector<uint8_t> quantize(RowFormat format, const std::vector<float>& x, int64_t rows,
                              int64_t cols) {
  std::vector<uint8_t> out(static_cast<size_t>(rows * row_bytes(format, cols)));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* dst = out.data() + r * row_bytes(format, cols);
    if (format == RowFormat::kNF4) quantize_row_nf4(x.data() + r * cols, dst, cols);
    if (format == RowFormat::kFP4) quantize_row_fp4(x.data() + r * cols, dst, cols);
  }
  return out;
}

TEST(Bnb4, QuantizerAndDequantizerAreBitsandbytes) {
  const Json f = fixture();
  ASSERT_EQ(f["cases"].size(), 2u);
  for (const Json& c : f["cases"]) {
    const RowFormat format = format_of(c["quant_type"]);
    SCOPED_TRACE(row_format_info(format).name);
    const int64_t rows = c["rows"], cols = c["cols"];
    const auto input = c["input"].get<std::vector<float>>();
    const auto absmax = c["absmax"].get<std::vector<float>>();
    const auto expected = c["dequantized"].get<std::vector<float>>();
    const std::string hex = c["packed_hex"];
    const std::vector<uint8_t> ours = quantize(format, input, rows, cols);
    // Our blocks: {absmax, the packed bytes of its 64 values}.
    const int64_t blocks = rows * cols / bnb4::kBlock;
    ASSERT_EQ(static_cast<int64_t>(hex.size()), blocks * 32 * 2);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = ours.data() + b * bnb4::kBlockBytes;
      EXPECT_EQ(bnb4::block_absmax(block), absmax[static_cast<size_t>(b)]) << "block " << b;
      for (int i = 0; i < 32; ++i) {
        const auto byte = static_cast<uint8_t>(
            std::stoi(hex.substr(static_cast<size_t>((b * 32 + i) * 2), 2), nullptr, 16));
        ASSERT_EQ(block[bnb4::kQsOffset + i], byte) << "block " << b << " byte " << i;
      }
    }
    for (Isa isa : testing::supported_isas()) {
      SCOPED_TRACE(isa_name(isa));
      std::vector<float> values(static_cast<size_t>(rows * cols));
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(format, ours.data() + r * row_bytes(format, cols), values.data() + r * cols,
                       cols, isa);
      }
      for (size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(values[i]), std::bit_cast<uint32_t>(expected[i])) << i;
      }
    }
  }
}

// Dots and the matmul (decode and prefill, both settings of quantize_activations, which NF4/FP4
// ignore) against the dequantized rows in double precision.
TEST(Bnb4, DotsAndMatmulFollowTheDequantizedRows) {
  ThreadPool pool(2);
  const int64_t n = 24, k = 512;
  const std::vector<float> w = testing::random_floats(n * k, 7);
  for (RowFormat format : {RowFormat::kNF4, RowFormat::kFP4}) {
    SCOPED_TRACE(row_format_info(format).name);
    const std::vector<uint8_t> rows = quantize(format, w, n, k);
    std::vector<float> values(static_cast<size_t>(n * k));
    for (int64_t j = 0; j < n; ++j) {
      dequantize_row(format, rows.data() + j * row_bytes(format, k), values.data() + j * k, k,
                     Isa::kScalar);
    }
    for (int64_t m : {1, 5}) {
      const std::vector<float> x = testing::random_floats(m * k, 11 + static_cast<uint32_t>(m));
      for (Isa isa : testing::supported_isas()) {
        for (bool int8 : {false, true}) {
          std::vector<float> y(static_cast<size_t>(m * n));
          matmul(format, rows.data(), row_bytes(format, k), x.data(), y.data(), m, n, k, pool,
                 nullptr, isa, int8);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              const double ref = testing::dot_double(x.data() + i * k, values.data() + j * k, k);
              EXPECT_NEAR(y[static_cast<size_t>(i * n + j)], ref, 1e-4 * (1 + std::abs(ref)))
                  << isa_name(isa) << " m " << m << " row " << j;
            }
          }
        }
        const float dot = dot_row(format, rows.data(), x.data(), k, isa);
        EXPECT_NEAR(dot, testing::dot_double(x.data(), values.data(), k), 1e-4);
      }
    }
  }
}

}  // namespace
}  // namespace lm::kernels
