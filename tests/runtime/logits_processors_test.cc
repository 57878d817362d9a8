// Each logit processor against HF transformers' warpers (tests/fixtures/sampler/hf_warpers.json,
// made by scripts/fixtures/make_sampler_references.py) and against small hand-computed cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/logits_processors.h"
#include "runtime/random.h"

namespace lm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> read_floats(const nlohmann::json& values) {
  std::vector<float> out;
  for (const auto& v : values)
    out.push_back(v.is_null() ? -kInf : static_cast<float>(v.get<double>()));
  return out;
}

TokenCountMap count_ids(const std::vector<int32_t>& ids) {
  TokenCountMap counts;
  for (int32_t id : ids) ++counts[id];
  return counts;
}

void expect_scores_near(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " id " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], 2e-5f * std::max(1.0f, std::fabs(want[i])))
          << what << " id " << i;
    }
  }
}

TEST(LogitsProcessors, MatchHfWarpersOnFixture) {
  std::ifstream in(std::string(LM_REPO_ROOT) + "/tests/fixtures/sampler/hf_warpers.json");
  ASSERT_TRUE(in) << "missing fixture; run scripts/fixtures/make_sampler_references.py";
  const auto fixture = nlohmann::json::parse(in);
  ASSERT_GE(fixture["cases"].size(), 100u);
  ProcessorScratch scratch;
  for (const auto& c : fixture["cases"]) {
    const std::string name = c["name"];
    std::vector<float> scores = read_floats(c["logits"]);
    for (const auto& step : c["steps"]) {
      const std::string op = step["op"];
      if (op == "temperature") {
        apply_temperature(scores, step["value"].get<float>());
      } else if (op == "top_k") {
        apply_top_k(scores, step["value"].get<int32_t>(), scratch);
      } else if (op == "top_p") {
        apply_top_p(scores, step["value"].get<float>(), scratch);
      } else if (op == "typical_p") {
        apply_typical_p(scores, step["value"].get<float>(), scratch);
      } else if (op == "repetition_penalty") {
        apply_repetition_penalty(scores, count_ids(step["input_ids"].get<std::vector<int32_t>>()),
                                 step["value"].get<float>());
      } else {
        FAIL() << "unknown op " << op;
      }
    }
    expect_scores_near(scores, read_floats(c["expected"]), name);
    const LogSoftmax norm = log_softmax_of(scores);
    std::vector<float> logprobs;
    for (float x : scores) logprobs.push_back(norm.logprob(x));
    expect_scores_near(logprobs, read_floats(c["expected_logprobs"]), name + " logprobs");
  }
}

// Straight transcriptions of HF's warpers (full stable sort, cumulative sums from the start) to
// check the quickselect paths on vocabularies far larger than the fixture's.
std::vector<float> probs_of(const std::vector<float>& scores) {
  const LogSoftmax norm = log_softmax_of(scores);
  std::vector<float> probs;
  for (float x : scores) probs.push_back(static_cast<float>(std::exp(x - norm.max) / norm.sum_exp));
  return probs;
}

void naive_top_p(std::vector<float>& scores, float top_p) {
  const std::vector<float> probs = probs_of(scores);
  std::vector<int32_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return scores[a] < scores[b]; });
  double cumulative = 0.0;
  for (size_t j = 0; j + 1 < order.size(); ++j) {
    cumulative += probs[order[j]];
    if (static_cast<float>(cumulative) <= 1.0f - top_p) scores[order[j]] = -kInf;
  }
}

void naive_typical_p(std::vector<float>& scores, float mass) {
  const LogSoftmax norm = log_softmax_of(scores);
  const std::vector<float> probs = probs_of(scores);
  double neg_entropy = 0.0;
  for (float x : scores) {
    const float lp = norm.logprob(x);
    if (lp != -kInf) neg_entropy += static_cast<double>(lp) * std::exp(lp);
  }
  std::vector<float> shifted;
  for (float x : scores) {
    shifted.push_back(std::fabs(-norm.logprob(x) - static_cast<float>(-neg_entropy)));
  }
  std::vector<int32_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return shifted[a] < shifted[b]; });
  double cumulative = 0.0;
  size_t last = 0;
  for (int32_t id : order) {
    cumulative += probs[id];
    last += static_cast<float>(cumulative) < mass;
  }
  last = std::min(last, order.size() - 1);
  const float threshold = shifted[order[last]];
  for (size_t i = 0; i < scores.size(); ++i) {
    if (shifted[i] > threshold) scores[i] = -kInf;
  }
}

void naive_top_k(std::vector<float>& scores, int32_t k) {
  std::vector<float> sorted = scores;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  const float kth = sorted[static_cast<size_t>(k - 1)];
  for (float& x : scores) {
    if (x < kth) x = -kInf;
  }
}

TEST(LogitsProcessors, LargeVocabMatchesNaiveTranscriptions) {
  Random random(99);
  ProcessorScratch scratch;
  for (int trial = 0; trial < 24; ++trial) {
    const size_t vocab = 2000 + static_cast<size_t>(trial) * 537;
    const double spread = 1.0 + trial % 4 * 3.0;  // flat to peaked distributions
    std::vector<float> logits(vocab);
    for (float& x : logits) {
      x = static_cast<float>((random.next_double() - 0.5) * 2.0 * spread);
      if (trial % 3 == 1) x = std::round(x * 4.0f) / 4.0f;  // many ties
      if (trial % 3 == 2 && random.next_double() < 0.2) x = -kInf;
    }
    const float p = 0.3f + 0.65f * static_cast<float>(random.next_double());
    const std::string what = "trial " + std::to_string(trial) + " p " + std::to_string(p);

    std::vector<float> got = logits, want = logits;
    apply_top_p(got, p, scratch);
    naive_top_p(want, p);
    EXPECT_EQ(got, want) << "top_p " << what;

    got = logits, want = logits;
    apply_typical_p(got, p, scratch);
    naive_typical_p(want, p);
    EXPECT_EQ(got, want) << "typical_p " << what;

    const int32_t k = 1 + static_cast<int32_t>(random.next_u64() % (trial % 2 ? 50 : vocab - 1));
    got = logits, want = logits;
    apply_top_k(got, k, scratch);
    naive_top_k(want, k);
    EXPECT_EQ(got, want) << "top_k " << k << " " << what;
  }
}

TEST(LogitsProcessors, SanitizeMapsNanToMinusInfAndClampsPlusInf) {
  std::vector<float> scores = {1.0f, std::nanf(""), kInf, -kInf};
  sanitize_scores(scores);
  EXPECT_EQ(scores[0], 1.0f);
  EXPECT_EQ(scores[1], -kInf);
  EXPECT_EQ(scores[2], std::numeric_limits<float>::max());
  EXPECT_EQ(scores[3], -kInf);
}

TEST(LogitsProcessors, LogSoftmaxOfAllMinusInfIsMinusInfAtZero) {
  std::vector<float> scores(4, -kInf);
  const LogSoftmax norm = log_softmax_of(scores);
  EXPECT_EQ(norm.argmax, 0);
  EXPECT_EQ(norm.logprob(scores[0]), -kInf);
}

TEST(LogitsProcessors, LogSoftmaxArgmaxIsLowestIdAmongTies) {
  std::vector<float> scores = {0.0f, 2.0f, -1.0f, 2.0f};
  const LogSoftmax norm = log_softmax_of(scores);
  EXPECT_EQ(norm.argmax, 1);
  // p = e^2 / (1 + 2e^2 + e^-1)
  const double expected = 2.0 - std::log(1.0 + 2.0 * std::exp(2.0) + std::exp(-1.0));
  EXPECT_NEAR(norm.logprob(2.0f), expected, 1e-6);
}

TEST(LogitsProcessors, RepetitionPenaltyDividesPositiveMultipliesNegativeOncePerId) {
  std::vector<float> scores = {2.0f, -1.0f, 3.0f, 0.0f, -4.0f};
  // id 0 three times: penalised once, as HF's gather/scatter does; id 9 is outside the vocab.
  apply_repetition_penalty(scores, count_ids({0, 0, 0, 1, 3, 9}), 2.0f);
  EXPECT_EQ(scores, (std::vector<float>{1.0f, -2.0f, 3.0f, 0.0f, -4.0f}));
}

TEST(LogitsProcessors, RepetitionPenaltyBelowOneFavoursRepeats) {
  std::vector<float> scores = {2.0f, -1.0f};
  apply_repetition_penalty(scores, count_ids({0, 1}), 0.5f);
  EXPECT_EQ(scores, (std::vector<float>{4.0f, -0.5f}));
}

TEST(LogitsProcessors, FrequencyPenaltyIsCountOverNumIdsPresenceIsFlat) {
  std::vector<float> scores = {1.0f, 1.0f, 1.0f, 1.0f};
  // 8 ids: id 0 x4, id 1 x2, id 2 x2.
  const TokenCountMap counts = count_ids({0, 0, 0, 0, 1, 1, 2, 2});
  apply_frequency_presence_penalty(scores, counts, 8, 1.0f, 0.0f);
  EXPECT_EQ(scores, (std::vector<float>{0.5f, 0.75f, 0.75f, 1.0f}));
  apply_frequency_presence_penalty(scores, counts, 8, 0.0f, 0.25f);
  EXPECT_EQ(scores, (std::vector<float>{0.25f, 0.5f, 0.5f, 1.0f}));
  // Negative penalties (allowed down to -2 by TGI) raise repeated tokens.
  apply_frequency_presence_penalty(scores, counts, 8, -2.0f, 0.0f);
  EXPECT_EQ(scores, (std::vector<float>{1.25f, 1.0f, 1.0f, 1.0f}));
}

TEST(LogitsProcessors, TemperatureScalesLogprobs) {
  std::vector<float> scores = {0.0f, 1.0f};
  apply_temperature(scores, 0.5f);
  EXPECT_EQ(scores, (std::vector<float>{0.0f, 2.0f}));
  // log p(1) = 2 - log(1 + e^2): sharper than the untempered 1 - log(1 + e).
  const LogSoftmax norm = log_softmax_of(scores);
  EXPECT_NEAR(norm.logprob(scores[1]), 2.0 - std::log(1.0 + std::exp(2.0)), 1e-6);
}

TEST(LogitsProcessors, TopKKeepsExactlyKWithoutTies) {
  std::vector<float> scores = {0.5f, 3.0f, -1.0f, 2.0f, 1.0f};
  ProcessorScratch scratch;
  apply_top_k(scores, 2, scratch);
  EXPECT_EQ(scores, (std::vector<float>{-kInf, 3.0f, -kInf, 2.0f, -kInf}));
}

TEST(LogitsProcessors, TopKKeepsEveryTieAtTheBoundary) {
  std::vector<float> scores = {1.0f, 3.0f, 1.0f, 2.0f, 1.0f, 0.0f};
  ProcessorScratch scratch;
  apply_top_k(scores, 3, scratch);  // 3rd largest is 1.0, held by ids 0, 2, 4
  EXPECT_EQ(scores, (std::vector<float>{1.0f, 3.0f, 1.0f, 2.0f, 1.0f, -kInf}));
}

TEST(LogitsProcessors, TopKAtLeastVocabIsNoOp) {
  std::vector<float> scores = {1.0f, 2.0f};
  ProcessorScratch scratch;
  apply_top_k(scores, 2, scratch);
  apply_top_k(scores, 50, scratch);
  EXPECT_EQ(scores, (std::vector<float>{1.0f, 2.0f}));
}

TEST(LogitsProcessors, TopPOnAnExactCumulativeSumDropsTheLowerIdsOfATie) {
  // Four equal tokens, p = 0.25 each (exact). HF sorts ascending (ids 0,1,2,3), cumulative
  // 0.25, 0.5, 0.75, 1 and drops those <= 1 - 0.5: ids 0 and 1. Kept mass is exactly top_p.
  std::vector<float> scores = {0.0f, 0.0f, 0.0f, 0.0f};
  ProcessorScratch scratch;
  apply_top_p(scores, 0.5f, scratch);
  EXPECT_EQ(scores, (std::vector<float>{-kInf, -kInf, 0.0f, 0.0f}));
}

TEST(LogitsProcessors, TopPJustAboveACumulativeSumKeepsOneMore) {
  std::vector<float> scores = {0.0f, 0.0f, 0.0f, 0.0f};
  ProcessorScratch scratch;
  apply_top_p(scores, 0.5078125f, scratch);  // 1 - p = 0.4921875 < 0.5
  EXPECT_EQ(scores, (std::vector<float>{-kInf, 0.0f, 0.0f, 0.0f}));
}

TEST(LogitsProcessors, TopPAlwaysKeepsTheBestToken) {
  // p(best) = 1 / (1 + 3e^-5) ~ 0.98 > top_p: only the best survives, even at a tiny top_p.
  std::vector<float> scores = {-5.0f, 0.0f, -5.0f, -5.0f};
  ProcessorScratch scratch;
  apply_top_p(scores, 0.01f, scratch);
  EXPECT_EQ(scores, (std::vector<float>{-kInf, 0.0f, -kInf, -kInf}));
}

TEST(LogitsProcessors, TopPKeepsTheSmallestSetReachingTheMass) {
  // probs ~ 0.6439, 0.2369, 0.0871, 0.0321 for logits 3, 2, 1, 0.
  std::vector<float> scores = {1.0f, 3.0f, 0.0f, 2.0f};
  ProcessorScratch scratch;
  std::vector<float> a = scores;
  apply_top_p(a, 0.85f, scratch);  // 0.6439 + 0.2369 = 0.8808 >= 0.85
  EXPECT_EQ(a, (std::vector<float>{-kInf, 3.0f, -kInf, 2.0f}));
  std::vector<float> b = scores;
  apply_top_p(b, 0.9f, scratch);  // needs the third: 0.9679
  EXPECT_EQ(b, (std::vector<float>{1.0f, 3.0f, -kInf, 2.0f}));
}

TEST(LogitsProcessors, TopPScalesToALargeVocab) {
  // 50000 tokens: one at 10 (p = 0.5998), 99 at 5 (p = 0.004042 each), the rest at -10
  // (6.2e-5 in all). HF drops ascending positions with cumulative mass <= 1 - top_p.
  std::vector<float> scores(50000, -10.0f);
  scores[123] = 10.0f;
  for (int i = 0; i < 99; ++i) scores[1000 + i * 7] = 5.0f;
  auto num_kept = [](const std::vector<float>& s) {
    int kept = 0;
    for (float x : s) kept += x != -kInf;
    return kept;
  };
  ProcessorScratch scratch;
  std::vector<float> a = scores;
  apply_top_p(a, 0.999f, scratch);  // only the -10 tail fits under 0.001
  EXPECT_EQ(num_kept(a), 100);
  EXPECT_EQ(a[123], 10.0f);
  std::vector<float> b = scores;
  apply_top_p(b, 0.99f, scratch);  // 6.2e-5 + 2 * 0.004042 <= 0.01 < 6.2e-5 + 3 * 0.004042
  EXPECT_EQ(num_kept(b), 98);
  // Ties drop lower ids first: the two lowest-id tokens at 5 went.
  EXPECT_EQ(b[1000], -kInf);
  EXPECT_EQ(b[1007], -kInf);
  EXPECT_EQ(b[1014], 5.0f);
}

TEST(LogitsProcessors, TypicalPByHand) {
  // Computed in float64: p = [0.6623, 0.2436, 0.0896, 0.0045], H = 0.8573,
  // |-log p - H| = [0.4452, 0.5548, 1.5548, 4.5548]: ranked 0, 1, 2, 3 with cumulative mass
  // 0.6623, 0.9059, ... so 0.8 is reached at id 1 and 0.5 at id 0.
  std::vector<float> scores = {2.0f, 1.0f, 0.0f, -3.0f};
  ProcessorScratch scratch;
  std::vector<float> a = scores;
  apply_typical_p(a, 0.8f, scratch);
  EXPECT_EQ(a, (std::vector<float>{2.0f, 1.0f, -kInf, -kInf}));
  std::vector<float> b = scores;
  apply_typical_p(b, 0.5f, scratch);
  EXPECT_EQ(b, (std::vector<float>{2.0f, -kInf, -kInf, -kInf}));
}

TEST(LogitsProcessors, TypicalPCanDropTheMostLikelyToken) {
  // Logit 3 then 50 zeros: p0 = 0.2866 (-log p = 1.250), each small p = 0.01427 (-log p = 4.250),
  // H = 3.390. Distances 2.140 vs 0.860: the small tokens rank first, 0.5 is reached inside
  // their tie group, so all 50 stay (value-based cut) and the argmax goes.
  std::vector<float> scores(51, 0.0f);
  scores[0] = 3.0f;
  ProcessorScratch scratch;
  apply_typical_p(scores, 0.5f, scratch);
  EXPECT_EQ(scores[0], -kInf);
  for (size_t i = 1; i < scores.size(); ++i) EXPECT_EQ(scores[i], 0.0f) << i;
}

TEST(LogitsProcessors, ProcessorsLeaveAllMinusInfAlone) {
  std::vector<float> scores(5, -kInf);
  ProcessorScratch scratch;
  apply_top_k(scores, 2, scratch);
  apply_top_p(scores, 0.5f, scratch);
  apply_typical_p(scores, 0.5f, scratch);
  for (float x : scores) EXPECT_EQ(x, -kInf);
}

}  // namespace
}  // namespace lm
