// LLM.int8's quantizers (TGI's --quantize bitsandbytes) against bitsandbytes' own
// (scripts/fixtures/make_llm_int8_references.py): weight rows give its int8 values and absmax
// (fp16 rounding of the input, ties rounded half to even) as Q8_0 blocks of scale 1; activation
// rows keep their outliers (>= 6 after the fp16 cast) and quantize the rest per token.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "kernels/cpu/llm_int8.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

using Json = nlohmann::json;

Json fixture() {
  std::ifstream in(std::string(LM_REPO_ROOT) + "/tests/fixtures/quant_blocks/llm_int8.json");
  return Json::parse(in);
}

TEST(LlmInt8, WeightRowsGetBitsandbytesValuesAndAbsmax) {
  const Json f = fixture();
  const int64_t rows = f["rows"], cols = f["cols"];
  const auto weight = f["weight"].get<std::vector<float>>();
  const auto q = f["q"].get<std::vector<int>>();
  const auto scb = f["scb"].get<std::vector<float>>();
  const int64_t bytes = row_bytes(RowFormat::kQ8_0, cols);
  std::vector<uint8_t> row(static_cast<size_t>(bytes));
  int64_t ties = 0;
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(quantize_row_llm_int8(weight.data() + r * cols, row.data(), cols),
              scb[static_cast<size_t>(r)])
        << "row " << r;
    for (int64_t b = 0; b < cols / kQuantBlockSize; ++b) {
      const uint8_t* block = row.data() + b * quant::kQ8_0Bytes;
      ASSERT_EQ(quant::load_f16(block), 1.0f) << "row " << r << " block " << b;
      for (int64_t i = 0; i < kQuantBlockSize; ++i) {
        const int64_t c = b * kQuantBlockSize + i;
        const float w = weight[static_cast<size_t>(r * cols + c)];
        ties += scb[static_cast<size_t>(r)] == 127.0f && w != std::floor(w);
        ASSERT_EQ(static_cast<int8_t>(block[2 + i]), q[static_cast<size_t>(r * cols + c)])
            << "row " << r << " col " << c << " w " << w;
      }
    }
  }
  EXPECT_GT(ties, 100);  // the fixture's row of halves: half to even, not away from zero
}

TEST(LlmInt8, AnAllZeroWeightRowHasZeroValuesAndAbsmax) {
  std::vector<float> zeros(64, 0.0f);
  std::vector<uint8_t> row(static_cast<size_t>(row_bytes(RowFormat::kQ8_0, 64)), 0xff);
  EXPECT_EQ(quantize_row_llm_int8(zeros.data(), row.data(), 64), 0.0f);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < kQuantBlockSize; ++i)
      EXPECT_EQ(row[static_cast<size_t>(b * quant::kQ8_0Bytes + 2 + i)], 0);
}

TEST(LlmInt8, ActivationsKeepOutliersAndQuantizeTheRestPerToken) {
  const int64_t k = 8;
  // Outliers after the fp16 cast: 6 (the threshold itself), 5.999 (6 in fp16), -7; 5.99 is not
  // one (5.98828125 in fp16), so it sets the row's absmax.
  const std::vector<float> x = {6.0f, 5.999f, -7.0f, 5.99f, 1.0f, -2.5f, 0.0f, 0.1f};
  std::vector<float> out(static_cast<size_t>(k));
  llm_int8_activations(x.data(), out.data(), 1, k);
  EXPECT_EQ(out[0], 6.0f);
  EXPECT_EQ(out[1], 5.999f);  // kept as given, in fp32
  EXPECT_EQ(out[2], -7.0f);
  const float absmax = fp16_to_fp32(fp32_to_fp16(5.99f));
  ASSERT_EQ(absmax, 5.98828125f);
  const float step = absmax * (6.200124e-05f * 127.0f);
  const float factor = (1.0f / absmax) * 127.0f;  // torch's 127.0 / absmax
  for (int64_t i = 3; i < k; ++i) {
    const float a = fp16_to_fp32(fp32_to_fp16(x[static_cast<size_t>(i)]));
    EXPECT_EQ(out[static_cast<size_t>(i)], std::nearbyint(a * factor) * step) << i;
  }
  EXPECT_EQ(out[3], 127.0f * step);  // the absmax: 127 levels
  EXPECT_EQ(out[6], 0.0f);
  // Rows are independent: a second row of small values gets its own absmax.
  std::vector<float> two(x);
  for (int64_t i = 0; i < k; ++i) two.push_back(0.01f * static_cast<float>(i));
  std::vector<float> both(static_cast<size_t>(2 * k));
  llm_int8_activations(two.data(), both.data(), 2, k);
  for (int64_t i = 0; i < k; ++i)
    EXPECT_EQ(both[static_cast<size_t>(i)], out[static_cast<size_t>(i)]);
  EXPECT_NEAR(both[static_cast<size_t>(2 * k - 1)], 0.07f, 0.07f / 127);
}

TEST(LlmInt8, ARowOfOnlyOutliersHasNoIntegerPart) {
  const std::vector<float> x = {-9.0f, 8.0f, 0.0f, 6.5f};
  std::vector<float> out(x.size());
  llm_int8_activations(x.data(), out.data(), 1, 4);
  EXPECT_EQ(out, x);
}

}  // namespace
}  // namespace lm::kernels
