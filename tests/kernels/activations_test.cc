// SwiGLU, GeGLU, the sum of exps, residual add and softmax against double-precision formulas,
// including extreme inputs; the sampler's scans (sanitize, first max) against the scalar table.
#include "kernels/cpu/activations.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace lm::kernels {
namespace {

TEST(Activations, SiluMulMatchesFormulaOnEveryIsa) {
  auto gate = testing::random_floats(101, 1, -10.0f, 10.0f);
  gate[0] = -100.0f;  // exp(100) overflows to inf: silu must give -0, not nan
  gate[1] = 100.0f;
  gate[2] = 0.0f;
  const auto up = testing::random_floats(101, 2);
  for (Isa isa : testing::supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> out(101);
    silu_mul(gate.data(), up.data(), out.data(), 101, isa);  // 101: vector body and a tail
    for (int i = 0; i < 101; ++i) {
      const double g = gate[i];
      const double expected = g / (1.0 + std::exp(-g)) * up[i];
      // The vector tables' exp is a polynomial (relative error < 3e-7): within the same bound.
      EXPECT_NEAR(out[i], expected, 1e-6 * (1.0 + std::fabs(expected))) << i;
    }
    std::vector<float> aliased = gate;
    silu_mul(aliased.data(), up.data(), aliased.data(), 101, isa);
    EXPECT_EQ(aliased, out);
  }
}

// Gemma's GeGLU: torch's gelu(approximate="tanh") in double, with inputs whose cube overflows the
// tanh's argument range (+-100) and the region where the sigmoid form and tanh differ most.
TEST(Activations, GeluTanhMulMatchesFormulaOnEveryIsa) {
  auto gate = testing::random_floats(101, 4, -6.0f, 6.0f);
  gate[0] = -100.0f;
  gate[1] = 100.0f;
  gate[2] = 0.0f;
  gate[3] = -1e-3f;
  const auto up = testing::random_floats(101, 5);
  for (Isa isa : testing::supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> out(101);
    gelu_tanh_mul(gate.data(), up.data(), out.data(), 101, isa);
    for (int i = 0; i < 101; ++i) {
      const double x = gate[i];
      const double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
      const double expected = 0.5 * x * (1.0 + std::tanh(inner)) * up[i];
      EXPECT_NEAR(out[i], expected, 2e-6 * (1.0 + std::fabs(expected))) << i;
    }
    std::vector<float> aliased = gate;
    gelu_tanh_mul(aliased.data(), up.data(), aliased.data(), 101, isa);
    EXPECT_EQ(aliased, out);
  }
}

// A vocabulary-sized softmax normaliser: stretches of 256 and a tail, -inf scores (filtered
// tokens) adding nothing, scores far below the max adding (almost) nothing.
TEST(Activations, SumExpMatchesFormulaOnEveryIsa) {
  constexpr int64_t n = 49152 + 77;
  auto x = testing::random_floats(n, 3, -30.0f, 5.0f);
  for (int64_t i = 0; i < n; i += 5) x[i] = -std::numeric_limits<float>::infinity();
  x[7] = -200.0f;
  const float max = *std::max_element(x.begin(), x.end());
  double expected = 0.0;
  for (float v : x) expected += std::exp(static_cast<double>(v) - max);
  for (Isa isa : testing::supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    // Polynomial exps (relative error < 2e-7) added in float lanes over stretches of 256.
    EXPECT_NEAR(sum_exp(x.data(), n, max, isa), expected, 1e-6 * expected);
    const double tail = std::exp(double{x[1]} - max) + std::exp(double{x[2]} - max);
    EXPECT_NEAR(sum_exp(x.data(), 3, max, isa), tail, 1e-6 * tail);  // the tail alone
    EXPECT_EQ(sum_exp(x.data(), 0, max, isa), 0.0);
  }
  // All -inf but one at the max: exactly 1; all -inf: exactly 0 (e^-87 per term would show).
  std::vector<float> one(300, -std::numeric_limits<float>::infinity());
  const std::vector<float> none = one;
  one[123] = 2.5f;
  for (Isa isa : testing::supported_isas()) {
    EXPECT_EQ(sum_exp(one.data(), 300, 2.5f, isa), 1.0);
    EXPECT_EQ(sum_exp(none.data(), 300, 0.0f, isa), 0.0);
  }
}

// NaN, +inf, -inf, the largest float and -0 in the vector body and in the tail, at every level
// the scalar table's values.
TEST(Activations, SanitizeScoresGivesTheScalarTablesValuesOnEveryIsa) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kMax = std::numeric_limits<float>::max();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto row = testing::random_floats(1000 + 13, 9, -20.0f, 20.0f);
  for (int64_t i : {0, 7, 31, 500, 1005, 1012}) row[i] = nan;
  for (int64_t i : {3, 64, 1001}) row[i] = kInf;
  for (int64_t i : {5, 65, 1002}) row[i] = -kInf;
  row[6] = kMax;
  row[8] = -0.0f;
  row[1009] = -0.0f;  // the tail (ids 1008-1012 at 8 and 16 lanes)
  row[1010] = kInf;
  for (Isa isa : testing::supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> x = row;
    sanitize_scores(x.data(), static_cast<int64_t>(x.size()), isa);
    for (size_t i = 0; i < x.size(); ++i) {
      const float expected = std::isnan(row[i]) ? -kInf : std::min(row[i], kMax);
      ASSERT_EQ(x[i], expected) << i;
      ASSERT_EQ(std::signbit(x[i]), std::signbit(expected)) << i;
    }
  }
}

// The lowest id holding the largest value: ties within a lane, across lanes and in the tail, a
// maximum only in the tail, NaN never counting, and -1 for rows with nothing above -inf.
TEST(Activations, FirstMaxFindsTheLowestIdOfTheLargestValueOnEveryIsa) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr int64_t n = 49152 + 13;
  const auto random = testing::random_floats(n, 11, -30.0f, 30.0f);
  struct Case {
    const char* name;
    std::vector<float> x;
    int64_t expected;
  };
  std::vector<Case> cases;
  cases.push_back(
      {"random", random, std::max_element(random.begin(), random.end()) - random.begin()});
  auto ties = random;
  // Ids 15 and 31 share a lane (7 at 8 lanes, 15 at 16) numbered above those of 40001 and 40002
  // (1 and 2), so the lowest id must win over the lowest lane; n - 1 is in the tail.
  for (int64_t i : {int64_t{40001}, int64_t{40002}, int64_t{31}, int64_t{15}, n - 1})
    ties[i] = 50.0f;
  cases.push_back({"ties", ties, 15});
  auto tail = random;
  tail[n - 3] = 60.0f;
  cases.push_back({"tail", tail, n - 3});
  auto tail_tie = tail;
  tail_tie[100] = 60.0f;
  cases.push_back({"tail tie", tail_tie, 100});
  auto with_nan = random;
  for (int64_t i = 0; i < n; i += 3) with_nan[i] = nan;
  with_nan[4] = 70.0f;
  cases.push_back({"nan", with_nan, 4});
  // -0 equals +0: the first zero wins whatever its sign (id 42 is in the tail).
  auto zeros = std::vector<float>(45, -kInf);
  zeros[1] = -0.0f;
  zeros[18] = 0.0f;
  zeros[42] = 0.0f;
  cases.push_back({"signed zeros", zeros, 1});
  cases.push_back({"shorter than the lanes", {2.0f, 5.0f, 5.0f}, 1});
  cases.push_back({"all -inf", std::vector<float>(300, -kInf), -1});
  cases.push_back({"all nan", std::vector<float>(300, nan), -1});
  auto inf = std::vector<float>(300, 1.0f);
  inf[290] = kInf;
  cases.push_back({"+inf", inf, 290});
  cases.push_back({"empty", {}, -1});
  for (Isa isa : testing::supported_isas()) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " " + c.name);
      EXPECT_EQ(first_max(c.x.data(), static_cast<int64_t>(c.x.size()), isa), c.expected);
    }
  }
}

// Every short length (all tail, one vector and a tail, several vectors) over the values the scans
// treat specially, against the scalar table.
TEST(Activations, ScoreScansGiveTheScalarTablesResultsOnRandomSpecialRows) {
  const float values[] = {std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::infinity(),
                          -0.0f,
                          0.0f,
                          1.0f,
                          std::numeric_limits<float>::infinity()};
  std::mt19937 rng(17);
  for (int64_t n = 0; n <= 70; ++n) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> row(static_cast<size_t>(n));
      for (float& v : row) v = values[rng() % std::size(values)];
      std::vector<float> expected = row;
      sanitize_scores(expected.data(), n, Isa::kScalar);
      const int64_t expected_max = first_max(row.data(), n, Isa::kScalar);
      for (Isa isa : testing::supported_isas()) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " n=" + std::to_string(n));
        ASSERT_EQ(first_max(row.data(), n, isa), expected_max);
        std::vector<float> x = row;
        sanitize_scores(x.data(), n, isa);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(x[i], expected[i]) << i;
          ASSERT_EQ(std::signbit(x[i]), std::signbit(expected[i])) << i;
        }
      }
    }
  }
}

TEST(Activations, AddInplace) {
  std::vector<float> y = {1.0f, 2.0f, 3.0f};
  const float x[3] = {0.5f, -2.0f, 10.0f};
  add_inplace(y.data(), x, 3);
  EXPECT_EQ(y, (std::vector<float>{1.5f, 0.0f, 13.0f}));
}

TEST(Activations, SoftmaxMatchesFormulaAndSurvivesLargeLogits) {
  auto x = testing::random_floats(37, 3, -5.0f, 5.0f);
  x[4] = 1000.0f;  // naive exp overflows
  x[9] = 999.0f;
  const auto original = x;
  softmax_inplace(x.data(), 37);
  double denominator = 0.0;
  for (float v : original) denominator += std::exp(static_cast<double>(v) - 1000.0);
  double total = 0.0;
  for (int i = 0; i < 37; ++i) {
    EXPECT_NEAR(x[i], std::exp(original[i] - 1000.0) / denominator, 1e-6) << i;
    total += x[i];
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_NEAR(x[4] / x[9], std::exp(1.0), 1e-5);
}

}  // namespace
}  // namespace lm::kernels
