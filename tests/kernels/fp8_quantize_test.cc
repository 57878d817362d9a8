// TGI's --quantize fp8 (one E4M3 scale a tensor) against TGI's fp8_quantize as run by
// scripts/fixtures/make_fp8_references.py: for fp32, bf16 and fp16 weights (typical values,
// values on E4M3's subnormals, ties between two E4M3 values, an all-zero tensor) the same bytes
// and the same stored scale (1 / scale), computed in the weight's dtype.
#include "kernels/cpu/fp8_quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lm::kernels {
namespace {

using Json = nlohmann::json;

Round16 dtype_of(const std::string& name) {
  if (name == "bfloat16") return Round16::kBF16;
  if (name == "float16") return Round16::kF16;
  return Round16::kNone;
}

TEST(Fp8Quantize, GivesTgisBytesAndScale) {
  std::ifstream in(std::string(LM_REPO_ROOT) + "/tests/fixtures/quant_blocks/fp8.json");
  const Json cases = Json::parse(in);
  ASSERT_EQ(cases.size(), 12u);
  int64_t subnormals = 0, nonzero = 0;
  for (const Json& c : cases) {
    const std::string name = c["name"].get<std::string>() + " " + c["dtype"].get<std::string>();
    SCOPED_TRACE(name);
    const int64_t rows = c["rows"], cols = c["cols"];
    const auto input = c["input_f32"].get<std::vector<float>>();
    const auto q = c["q"].get<std::vector<int>>();
    const Round16 dtype = dtype_of(c["dtype"]);
    float absmax = 0.0f;
    for (float v : input) absmax = std::max(absmax, std::abs(v));
    const float scale = fp8_tensor_scale(absmax, dtype);
    EXPECT_EQ(1.0f / scale, c["scale_inv"].get<float>());
    std::vector<uint8_t> ours(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row_fp8(input.data() + r * cols, cols, scale, dtype, ours.data());
      for (int64_t k = 0; k < cols; ++k) {
        const int expected = q[static_cast<size_t>(r * cols + k)];
        ASSERT_EQ(ours[static_cast<size_t>(k)], expected) << "row " << r << " col " << k;
        subnormals += (expected & 0x78) == 0 && (expected & 7) != 0;
        nonzero += (expected & 0x7f) != 0;
      }
    }
  }
  EXPECT_GT(subnormals, 100);  // the cases reach E4M3's subnormals
  EXPECT_GT(nonzero, 5000);
}

}  // namespace
}  // namespace lm::kernels
