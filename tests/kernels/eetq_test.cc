// EETQ's per-channel int8 rows (TGI's --quantize eetq) against EETQ's quantizer as restated by
// scripts/fixtures/make_eetq_references.py: the same int8 values and fp16 scale for every row
// (fp16 rounding of the input, ties, -128, the clamp to 127, an all-zero channel, subnormal
// scales), written as Q8_0 blocks that all carry the row's scale; and the Q8_0 kernels run such
// rows -- -128 in a quarter of the places -- at every ISA as the scalar reference does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/cpu/eetq.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

using Json = nlohmann::json;

constexpr RowFormat kQ8 = RowFormat::kQ8_0;

std::vector<uint8_t> quantize(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out(static_cast<size_t>(rows * row_bytes(kQ8, cols)));
  for (int64_t r = 0; r < rows; ++r)
    quantize_row_eetq(x.data() + r * cols, out.data() + r * row_bytes(kQ8, cols), cols);
  return out;
}

TEST(Eetq, QuantizerGivesEetqsValuesAsQ8_0Blocks) {
  std::ifstream in(std::string(LM_REPO_ROOT) + "/tests/fixtures/quant_blocks/eetq.json");
  const Json f = Json::parse(in);
  const int64_t rows = f["rows"], cols = f["cols"];
  const auto input = f["input"].get<std::vector<float>>();
  const auto q = f["q"].get<std::vector<int>>();
  const auto scales = f["scale_f16_bits"].get<std::vector<uint16_t>>();
  ASSERT_EQ(static_cast<int64_t>(q.size()), rows * cols);
  const std::vector<uint8_t> ours = quantize(input, rows, cols);
  int64_t minus_128 = 0, zero_scales = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t scale = scales[static_cast<size_t>(r)];
    zero_scales += scale == 0;
    for (int64_t b = 0; b < cols / kQuantBlockSize; ++b) {
      const uint8_t* block = ours.data() + r * row_bytes(kQ8, cols) + b * quant::kQ8_0Bytes;
      uint16_t d;
      std::memcpy(&d, block, sizeof(d));
      ASSERT_EQ(d, scale) << "row " << r << " block " << b;
      for (int64_t i = 0; i < kQuantBlockSize; ++i) {
        const int64_t c = b * kQuantBlockSize + i;
        const int expected = q[static_cast<size_t>(r * cols + c)];
        minus_128 += expected == -128;
        ASSERT_EQ(static_cast<int8_t>(block[2 + i]), expected) << "row " << r << " col " << c;
      }
    }
  }
  EXPECT_GT(minus_128, 0);    // the fixture reaches EETQ's -128 ...
  EXPECT_EQ(zero_scales, 1);  // ... and its all-zero channel
}

TEST(Eetq, Q8_0KernelsRunItsRowsAsTheScalarReferenceDoes) {
  ThreadPool pool(2);
  const int64_t n = 16, k = 512;
  std::vector<float> w = testing::random_floats(n * k, 5);
  for (size_t i = 0; i < w.size(); i += 4) w[i] = -1.5f;  // each row's max: q = -128 there
  const std::vector<uint8_t> rows = quantize(w, n, k);
  std::vector<float> values(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* row = rows.data() + j * row_bytes(kQ8, k);
    EXPECT_EQ(static_cast<int8_t>(row[2]), -128);
    dequantize_row(kQ8, row, values.data() + j * k, k, Isa::kScalar);
  }
  for (int64_t m : {1, 5}) {
    const std::vector<float> x = testing::random_floats(m * k, 9 + static_cast<uint32_t>(m));
    for (bool int8 : {false, true}) {
      std::vector<float> reference(static_cast<size_t>(m * n));
      matmul(kQ8, rows.data(), row_bytes(kQ8, k), x.data(), reference.data(), m, n, k, pool,
             nullptr, Isa::kScalar, int8);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const double exact = testing::dot_double(x.data() + i * k, values.data() + j * k, k);
          const double scale = testing::abs_dot_double(x.data() + i * k, values.data() + j * k, k);
          // int8 activations: one rounding of each activation to 1/254 of its block's max.
          EXPECT_NEAR(reference[static_cast<size_t>(i * n + j)], exact,
                      (int8 ? 1e-2 : 1e-5) * scale);
        }
      }
      for (Isa isa : testing::supported_isas()) {
        std::vector<float> y(static_cast<size_t>(m * n));
        matmul(kQ8, rows.data(), row_bytes(kQ8, k), x.data(), y.data(), m, n, k, pool, nullptr, isa,
               int8);
        for (size_t i = 0; i < y.size(); ++i) {
          EXPECT_NEAR(y[i], reference[i], 1e-4 * (1 + std::abs(reference[i])))
              << isa_name(isa) << " m " << m << " int8 " << int8 << " at " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace lm::kernels
