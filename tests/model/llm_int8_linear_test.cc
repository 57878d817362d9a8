// ops::linear over an LLM.int8 weight (TGI's --quantize bitsandbytes) against bitsandbytes'
// Linear8bitLt on the CPU (scripts/fixtures/make_llm_int8_references.py): the same outputs for
// activation rows with and without outliers, whatever quantize_activations says; a row's
// outliers its own, and its output the same bits alone or in a batch (bitsandbytes would keep a
// column in float for every row once one row has an outlier there); interleaved for the int8
// GEMM where it has whole groups of 8 rows (the same outputs), else kept where it lies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/llm_int8.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/row_format.h"
#include "ops/convert_weight.h"
#include "ops/cpu_weights.h"
#include "ops/linear.h"

namespace lm {
namespace {

using Json = nlohmann::json;

struct Fixture {
  Json f = [] {
    std::ifstream in(std::string(LM_REPO_ROOT) + "/tests/fixtures/quant_blocks/llm_int8.json");
    return Json::parse(in);
  }();
  int64_t n = f["rows"], k = f["cols"], m = f["x_rows"];
  std::vector<float> weight = f["weight"].get<std::vector<float>>();
  std::vector<float> bias = f["bias"].get<std::vector<float>>();
  std::vector<float> x = f["x"].get<std::vector<float>>();
  std::vector<float> y = f["y"].get<std::vector<float>>();
  Buffer rows{{n, k}, DType::kQ8_0};
  std::vector<float> absmax = std::vector<float>(static_cast<size_t>(n));
  Tensor w =
      ops::quantize_weight(Tensor{DType::kF32, {n, k}, weight.data(), Device::kCpu}, DType::kQ8_0,
                           rows.view().data, ops::RowQuantizer::kLlmInt8, absmax.data());

  Tensor bias_view() { return {DType::kF32, {n}, bias.data(), Device::kCpu}; }
};

std::vector<float> run(Fixture& fx, int64_t first, int64_t count, bool quantize_activations) {
  ThreadPool pool(2);
  std::vector<float> out(static_cast<size_t>(count * fx.n));
  Tensor x{DType::kF32, {count, fx.k}, fx.x.data() + first * fx.k, Device::kCpu};
  Tensor y{DType::kF32, {count, fx.n}, out.data(), Device::kCpu};
  ops::linear(x, fx.w, fx.bias_view(), y, pool, quantize_activations);
  return out;
}

TEST(LlmInt8Linear, GivesWhatLinear8bitLtGives) {
  Fixture fx;
  ASSERT_EQ(fx.w.int8_row_absmax, fx.absmax.data());
  for (int64_t r = 0; r < fx.m; ++r) {
    for (bool int8 : {false, true}) {
      const std::vector<float> ours = run(fx, r, 1, int8);
      float scale = 0;
      for (int64_t j = 0; j < fx.n; ++j)
        scale = std::max(scale, std::abs(fx.y[static_cast<size_t>(r * fx.n + j)]));
      for (int64_t j = 0; j < fx.n; ++j) {
        // Integer dots are exact in both; only the order of the fp32 sums differs (over blocks,
        // and the float outlier terms).
        EXPECT_NEAR(ours[static_cast<size_t>(j)], fx.y[static_cast<size_t>(r * fx.n + j)],
                    5e-6f * scale)
            << "row " << r << " output " << j << " int8 " << int8;
      }
    }
  }
}

TEST(LlmInt8Linear, ARowsOutputIsTheSameAloneOrInABatch) {
  Fixture fx;
  const std::vector<float> batch = run(fx, 0, fx.m, false);
  for (int64_t r = 0; r < fx.m; ++r) {
    const std::vector<float> alone = run(fx, r, 1, false);
    for (int64_t j = 0; j < fx.n; ++j)
      EXPECT_EQ(alone[static_cast<size_t>(j)], batch[static_cast<size_t>(r * fx.n + j)])
          << "row " << r << " output " << j;
  }
}

TEST(LlmInt8Linear, WeightsThatCannotBeInterleavedStayRowsWhereTheyLie) {
  Fixture fx;  // 5 rows: not a whole group of 8
  EXPECT_EQ(ops::plan_cpu_weight(fx.w, /*copy_rows=*/true), ops::CpuWeightPlan::kKeep);
}

TEST(LlmInt8Linear, InterleavedWeightsGiveWhatLinear8bitLtGivesAndAreBatchInvariant) {
  if (!kernels::has_interleaved_matmul()) GTEST_SKIP() << "no interleaved int8 GEMM here";
  Fixture fx;
  // The fixture's 5 rows and copies of its first 3: 8 rows, one interleaved group.
  const int64_t n = 8, k = fx.k;
  std::vector<float> weight = fx.weight, bias = fx.bias;
  weight.insert(weight.end(), fx.weight.begin(), fx.weight.begin() + 3 * k);
  bias.insert(bias.end(), fx.bias.begin(), fx.bias.begin() + 3);
  Buffer rows{{n, k}, DType::kQ8_0};
  std::vector<float> absmax(static_cast<size_t>(n));
  const Tensor w =
      ops::quantize_weight(Tensor{DType::kF32, {n, k}, weight.data(), Device::kCpu}, DType::kQ8_0,
                           rows.view().data, ops::RowQuantizer::kLlmInt8, absmax.data());
  ASSERT_EQ(ops::plan_cpu_weight(w, /*copy_rows=*/true), ops::CpuWeightPlan::kInterleave);
  Buffer arena = Buffer::of_bytes(n * w.row_bytes(), Buffer::Pages::kSmall);
  const Tensor placed =
      ops::place_cpu_weight(w, ops::CpuWeightPlan::kInterleave, arena.view().data);
  ASSERT_EQ(placed.layout, WeightLayout::kInterleaved8);
  ASSERT_EQ(placed.int8_row_absmax, absmax.data());
  ThreadPool pool(2);
  const Tensor b{DType::kF32, {n}, bias.data(), Device::kCpu};
  const auto run8 = [&](int64_t first, int64_t count) {
    std::vector<float> out(static_cast<size_t>(count * n));
    Tensor x{DType::kF32, {count, k}, fx.x.data() + first * k, Device::kCpu};
    Tensor y{DType::kF32, {count, n}, out.data(), Device::kCpu};
    ops::linear(x, placed, b, y, pool, /*quantize_activations=*/true);
    return out;
  };
  const std::vector<float> batch = run8(0, fx.m);
  for (int64_t r = 0; r < fx.m; ++r) {
    const std::vector<float> alone = run8(r, 1);
    float scale = 0;
    for (int64_t j = 0; j < fx.n; ++j)
      scale = std::max(scale, std::abs(fx.y[static_cast<size_t>(r * fx.n + j)]));
    for (int64_t j = 0; j < n; ++j) {
      const float expected = fx.y[static_cast<size_t>(r * fx.n + j % fx.n)];
      EXPECT_NEAR(alone[static_cast<size_t>(j)], expected, 5e-6f * scale)
          << "row " << r << " output " << j;
      EXPECT_EQ(alone[static_cast<size_t>(j)], batch[static_cast<size_t>(r * n + j)])
          << "row " << r << " output " << j;
    }
  }
}

}  // namespace
}  // namespace lm
