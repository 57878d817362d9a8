// RoPE: hand-computed rotations in both pair layouts, attention scaling, and the property that
// makes it work: q.k after rotation depends only on the distance between positions.
#include "kernels/cpu/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"

namespace lm::kernels {
namespace {

TEST(Rope, NeoxPairsFirstAndSecondHalf) {
  // head_dim 4: pairs (0, 2) at inv_freq 1 and (1, 3) at inv_freq 0.5; position 2.
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  const float inv_freq[2] = {1.0f, 0.5f};
  const int32_t position = 2;
  apply_rope(x.data(), &position, inv_freq, 1, 1, 4, RopeMode::kNeox);
  const float c0 = std::cos(2.0f), s0 = std::sin(2.0f), c1 = std::cos(1.0f), s1 = std::sin(1.0f);
  EXPECT_FLOAT_EQ(x[0], 1.0f * c0 - 3.0f * s0);
  EXPECT_FLOAT_EQ(x[2], 3.0f * c0 + 1.0f * s0);
  EXPECT_FLOAT_EQ(x[1], 2.0f * c1 - 4.0f * s1);
  EXPECT_FLOAT_EQ(x[3], 4.0f * c1 + 2.0f * s1);
}

// Partial rotary (Phi-4-mini): head_dim 6, rotary_dim 4: pairs (0, 2) and (1, 3) rotate as in a
// 4-wide head, elements 4 and 5 pass through; the second head starts at element 6.
TEST(Rope, PartialRotaryRotatesTheLeadingElementsOnly) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const float inv_freq[2] = {1.0f, 0.5f};
  const int32_t position = 2;
  apply_rope(x.data(), &position, inv_freq, 1, 2, 6, RopeMode::kNeox, 1.0f, 4);
  const float c0 = std::cos(2.0f), s0 = std::sin(2.0f), c1 = std::cos(1.0f), s1 = std::sin(1.0f);
  for (int head = 0; head < 2; ++head) {
    const float* r = x.data() + head * 6;
    const float b = static_cast<float>(head * 6);
    EXPECT_FLOAT_EQ(r[0], (b + 1) * c0 - (b + 3) * s0);
    EXPECT_FLOAT_EQ(r[2], (b + 3) * c0 + (b + 1) * s0);
    EXPECT_FLOAT_EQ(r[1], (b + 2) * c1 - (b + 4) * s1);
    EXPECT_FLOAT_EQ(r[3], (b + 4) * c1 + (b + 2) * s1);
    EXPECT_EQ(r[4], b + 5);
    EXPECT_EQ(r[5], b + 6);
  }
}

TEST(Rope, InterleavedPairsNeighbours) {
  // Two tokens, two heads; the second token at position 0 must be left unchanged.
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const std::vector<float> original = x;
  const float inv_freq[2] = {1.0f, 0.5f};
  const int32_t positions[2] = {3, 0};
  apply_rope(x.data(), positions, inv_freq, 2, 2, 4, RopeMode::kInterleaved, 0.5f);
  for (int head = 0; head < 2; ++head) {
    const float* o = original.data() + head * 4;
    const float* r = x.data() + head * 4;
    for (int i = 0; i < 2; ++i) {
      const float c = std::cos(3.0f * inv_freq[i]) * 0.5f;
      const float s = std::sin(3.0f * inv_freq[i]) * 0.5f;
      EXPECT_FLOAT_EQ(r[2 * i], o[2 * i] * c - o[2 * i + 1] * s);
      EXPECT_FLOAT_EQ(r[2 * i + 1], o[2 * i + 1] * c + o[2 * i] * s);
    }
  }
  for (int i = 8; i < 16; ++i) EXPECT_FLOAT_EQ(x[i], original[i] * 0.5f);  // cos 0 * 0.5
}

TEST(Rope, ScoresDependOnlyOnRelativePosition) {
  const int64_t head_dim = 64;
  std::vector<float> inv_freq(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    inv_freq[i] = 1.0f / std::pow(10000.0f, static_cast<float>(2 * i) / head_dim);
  }
  const auto q = testing::random_floats(head_dim, 1);
  const auto k = testing::random_floats(head_dim, 2);
  for (RopeMode mode : {RopeMode::kNeox, RopeMode::kInterleaved}) {
    auto score = [&](int32_t pq, int32_t pk) {
      auto qr = q;
      auto kr = k;
      apply_rope(qr.data(), &pq, inv_freq.data(), 1, 1, head_dim, mode);
      apply_rope(kr.data(), &pk, inv_freq.data(), 1, 1, head_dim, mode);
      return testing::dot_double(qr.data(), kr.data(), head_dim);
    };
    EXPECT_NEAR(score(7, 3), score(14, 10), 1e-4);
    EXPECT_NEAR(score(5, 5), testing::dot_double(q.data(), k.data(), head_dim), 1e-4);
    EXPECT_GT(std::fabs(score(7, 3) - score(7, 4)), 1e-3);  // rotation actually happened
  }
}

}  // namespace
}  // namespace lm::kernels
