// The router's choice per token (softmax over all experts, top-k, optional renormalization) and
// its regrouping by expert, on hand-made logits.
#include "model/expert_routing.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lm {
namespace {

TEST(ExpertRouting, TopKByProbabilityGroupedByExpert) {
  // 3 tokens, 4 experts, top-2.
  const std::vector<float> logits = {
      0.0f, 2.0f, 1.0f, -1.0f,  // token 0: experts 1, 2
      3.0f, 0.0f, 0.0f, 2.5f,   // token 1: experts 0, 3
      0.5f, 0.5f, 4.0f, 0.0f,   // token 2: expert 2, then 0 (tie with 1 goes to the lower index)
  };
  const ExpertRouting r = route_tokens(logits.data(), 3, 4, 2, /*normalize_top_k=*/true);
  EXPECT_EQ(r.begins, (std::vector<int32_t>{0, 2, 3, 5, 6}));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 2, 0, 0, 2, 1}));
  // Renormalized over the chosen two: token 0's weights are softmax([2, 1]).
  const float e1 = std::exp(1.0f);
  EXPECT_NEAR(r.weights[2], e1 / (e1 + 1), 1e-6);  // expert 1, token 0
  EXPECT_NEAR(r.weights[3], 1 / (e1 + 1), 1e-6);   // expert 2, token 0
  for (int64_t e = 0; e < 4; ++e) EXPECT_EQ(r.num_tokens_of(e), r.begins[e + 1] - r.begins[e]);
}

TEST(ExpertRouting, WithoutRenormalizationTheWeightsAreTheSoftmaxOverAllExperts) {
  const std::vector<float> logits = {1.0f, 0.0f, 0.0f, 0.0f};
  const ExpertRouting r = route_tokens(logits.data(), 1, 4, 1, /*normalize_top_k=*/false);
  const float e = std::exp(1.0f);
  ASSERT_EQ(r.tokens, std::vector<int32_t>{0});
  EXPECT_NEAR(r.weights[0], e / (e + 3), 1e-6);
  const ExpertRouting n = route_tokens(logits.data(), 1, 4, 1, /*normalize_top_k=*/true);
  EXPECT_FLOAT_EQ(n.weights[0], 1.0f);
}

}  // namespace
}  // namespace lm
