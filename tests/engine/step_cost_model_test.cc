// StepCostModel: the prior before any step, recovering known coefficients from synthetic steps,
// keeping the prior in a direction the steps never excited, following a change of machine speed,
// and the attended-token count of StepShape.
#include "engine/step_cost_model.h"

#include <gtest/gtest.h>

#include <random>

namespace lm {
namespace {

constexpr StepCostModel::Coefficients kTruth{.intercept = 0.004,
                                             .per_prefill_token = 0.0021,
                                             .per_decode_row = 0.0065,
                                             .per_attended_token = 3e-7};

double seconds(const StepCostModel::Coefficients& c, const StepShape& s) {
  return c.intercept + c.per_prefill_token * static_cast<double>(s.num_prefill_tokens) +
         c.per_decode_row * static_cast<double>(s.num_decode_rows) +
         c.per_attended_token * static_cast<double>(s.num_attended_tokens);
}

// A random step: some decoding rows at random positions, maybe a prompt chunk.
StepShape random_shape(std::mt19937& rng, bool with_prefill = true) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  StepShape shape;
  const int64_t num_decodes = uniform(0, 12);
  for (int64_t i = 0; i < num_decodes; ++i) shape.add(uniform(10, 3000), 1, false);
  if (with_prefill && uniform(0, 1) == 1) shape.add(uniform(0, 4000), uniform(16, 512), true);
  return shape;
}

void expect_near_relative(double got, double want, double tolerance) {
  EXPECT_NEAR(got, want, tolerance * want) << "got " << got << " want " << want;
}

TEST(StepShape, CountsTheKeyPositionsEachTokenAttendsTo) {
  StepShape shape;
  shape.add(/*first_position=*/0, /*num_tokens=*/4, /*prefill=*/true);  // 1 + 2 + 3 + 4
  EXPECT_EQ(shape.num_attended_tokens, 10);
  shape.add(9, 1, false);  // position 9 attends to 0..9
  EXPECT_EQ(shape.num_attended_tokens, 20);
  shape.add(4, 2, true);  // positions 4 and 5: 5 + 6
  EXPECT_EQ(shape.num_attended_tokens, 31);
  EXPECT_EQ(shape.num_prefill_tokens, 6);
  EXPECT_EQ(shape.num_decode_rows, 1);
}

TEST(StepShape, CapsEachTokenAtTheWindow) {
  StepShape shape{.window = 6};
  shape.add(0, 4, true);  // 1 + 2 + 3 + 4
  EXPECT_EQ(shape.num_attended_tokens, 10);
  shape.add(3, 5, true);  // positions 3..7: 4 + 5 + 6 + 6 + 6
  EXPECT_EQ(shape.num_attended_tokens, 37);
  shape.add(100, 1, false);  // position 100 reads [95, 100]
  EXPECT_EQ(shape.num_attended_tokens, 43);
  shape.add(20, 3, true);  // 6 + 6 + 6
  EXPECT_EQ(shape.num_attended_tokens, 61);
}

TEST(StepCostModel, PredictsWithThePriorBeforeAnyStep) {
  const StepCostModel model;
  StepShape shape;
  shape.add(0, 100, true);
  EXPECT_EQ(model.num_observed(), 0);
  EXPECT_DOUBLE_EQ(model.predict_seconds(shape), seconds(StepCostModel::kDefaultPrior, shape));
}

TEST(StepCostModel, RecoversKnownCoefficientsFromSyntheticSteps) {
  std::mt19937 rng(7);
  StepCostModel model;
  for (int i = 0; i < 300; ++i) {
    const StepShape shape = random_shape(rng);
    model.observe(shape, seconds(kTruth, shape));
  }
  const StepCostModel::Coefficients& c = model.coefficients();
  expect_near_relative(c.intercept, kTruth.intercept, 0.02);
  expect_near_relative(c.per_prefill_token, kTruth.per_prefill_token, 0.02);
  expect_near_relative(c.per_decode_row, kTruth.per_decode_row, 0.02);
  expect_near_relative(c.per_attended_token, kTruth.per_attended_token, 0.02);
}

TEST(StepCostModel, KeepsThePriorCostOfPromptTokensUntilItSeesAPrompt) {
  std::mt19937 rng(11);
  StepCostModel model;
  for (int i = 0; i < 200; ++i) {
    const StepShape shape = random_shape(rng, /*with_prefill=*/false);
    model.observe(shape, seconds(kTruth, shape));
  }
  // Decode-only steps say nothing about a prompt token: its cost stays the (conservative) prior.
  expect_near_relative(model.coefficients().per_prefill_token,
                       StepCostModel::kDefaultPrior.per_prefill_token, 0.05);
  expect_near_relative(model.coefficients().per_decode_row, kTruth.per_decode_row, 0.05);
}

TEST(StepCostModel, FollowsTheMachineWhenItSlowsDown) {
  std::mt19937 rng(3);
  StepCostModel model;
  for (int i = 0; i < 300; ++i) {
    const StepShape shape = random_shape(rng);
    model.observe(shape, seconds(kTruth, shape));
  }
  // Another process takes half the cores: every cost doubles; older steps fade out.
  for (int i = 0; i < 400; ++i) {
    const StepShape shape = random_shape(rng);
    model.observe(shape, 2 * seconds(kTruth, shape));
  }
  expect_near_relative(model.coefficients().per_prefill_token, 2 * kTruth.per_prefill_token, 0.02);
  expect_near_relative(model.coefficients().per_decode_row, 2 * kTruth.per_decode_row, 0.02);
}

TEST(StepCostModel, AFixedModelNeverLearnsAndCostsAreNeverNegative) {
  StepCostModel fixed = StepCostModel::fixed(kTruth);
  StepShape shape;
  shape.add(0, 10, true);
  fixed.observe(shape, 100.0);
  EXPECT_EQ(fixed.num_observed(), 0);
  EXPECT_DOUBLE_EQ(fixed.predict_seconds(shape), seconds(kTruth, shape));

  // Steps whose time falls as prompts grow would fit a negative cost: clamped at 0.
  StepCostModel model;
  for (int64_t n = 1; n <= 50; ++n) {
    StepShape s;
    s.add(0, n * 8, true);
    model.observe(s, 1.0 / static_cast<double>(n));
  }
  EXPECT_GE(model.coefficients().per_prefill_token, 0.0);
  EXPECT_GE(model.coefficients().per_attended_token, 0.0);
}

}  // namespace
}  // namespace lm
