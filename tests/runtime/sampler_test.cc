// Sampler: the processor chain in TGI's order, greedy and seeded choices, reported logprobs and
// top-n alternatives, and the seeded generator; hand-computed on vocabularies of 4-8 tokens, and
// the seeded draw over a vocabulary-sized one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/random.h"
#include "runtime/sampler.h"

namespace lm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

double log_softmax_at(const std::vector<double>& logits, size_t id) {
  double max = -kInf;
  for (double x : logits) max = std::max(max, x);
  double sum = 0.0;
  for (double x : logits) sum += std::exp(x - max);
  return logits[id] - max - std::log(sum);
}

TEST(Random, SplitmixMatchesPublishedValues) {
  // Rosetta Code's splitmix64 task, seed 1234567.
  uint64_t state = 1234567;
  const uint64_t expected[] = {6457827717110365317ull, 3203168211198807973ull,
                               9817491932198370423ull, 4593380528125082431ull,
                               16408922859458223821ull};
  for (uint64_t want : expected) EXPECT_EQ(splitmix64_next(state), want);
}

TEST(Random, XoshiroMatchesAnIndependentImplementation) {
  // Values from a Python transcription of the reference C code (xoshiro256starstar.c), seeded
  // with four splitmix64 outputs.
  Random random(0);
  EXPECT_EQ(random.next_u64(), 0x99ec5f36cb75f2b4ull);
  EXPECT_EQ(random.next_u64(), 0xbf6e1f784956452aull);
  EXPECT_EQ(random.next_u64(), 0x1a5f849d4933e6e0ull);
  EXPECT_EQ(random.next_u64(), 0x6aa594f1262d2d2cull);
  Random doubles(42);
  EXPECT_DOUBLE_EQ(doubles.next_double(), 0.08386297105988216);
  EXPECT_DOUBLE_EQ(doubles.next_double(), 0.3789802506626686);
  EXPECT_DOUBLE_EQ(doubles.next_double(), 0.6800434110281394);
}

TEST(Sampler, GreedyPicksArgmaxWithLowestIdOnTiesAndReportsLogSoftmax) {
  Sampler sampler(SamplingParams{}, {});
  EXPECT_FALSE(sampler.is_random());
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  const SampleResult r = sampler.sample(logits);
  EXPECT_EQ(r.id, 1);
  EXPECT_NEAR(r.logprob, log_softmax_at({0.5, 2.0, -1.0, 2.0, 1.0}, 1), 1e-6);
  EXPECT_TRUE(r.top_tokens.empty());
}

TEST(Sampler, LogitBiasMovesRawLogitsBeforeEveryProcessor) {
  SamplingParams params;
  params.logit_bias = {{4, 1.5f}, {1, -100.0f}, {99, 100.0f}};  // 99: past the logits, no effect
  params.top_k = 2;                                             // applies to the biased scores
  params.top_n_tokens = 2;
  Sampler sampler(params, {});
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  const SampleResult r = sampler.sample(logits);
  // 1: 2.0 - 100; 4: 1.0 + 1.5 = 2.5 now wins over 3's 2.0; top-2 keeps 4 and 3.
  EXPECT_EQ(r.id, 4);
  ASSERT_EQ(r.top_tokens.size(), 2u);
  EXPECT_EQ(r.top_tokens[1].id, 3);
  EXPECT_NEAR(r.logprob, log_softmax_at({-INFINITY, -INFINITY, -INFINITY, 2.0, 2.5}, 4), 1e-6);
}

TEST(Sampler, RepetitionPenaltyCoversPromptAndGeneratedIds) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  Sampler sampler(params, std::vector<int32_t>{2});
  std::vector<float> logits = {1.0f, 1.5f, 2.0f, -1.0f};
  SampleResult r = sampler.sample(logits);  // prompt id 2: 2.0 / 2 = 1.0 < 1.5
  EXPECT_EQ(r.id, 1);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 1.5f, 1.0f, -1.0f}));
  sampler.observe(1);
  logits = {1.0f, 1.5f, 2.0f, -1.0f};
  r = sampler.sample(logits);  // now 1.5 / 2 = 0.75; id 0 wins
  EXPECT_EQ(r.id, 0);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 0.75f, 1.0f, -1.0f}));
  EXPECT_NEAR(r.logprob, log_softmax_at({1.0, 0.75, 1.0, -1.0}, 0), 1e-6);
}

TEST(Sampler, NegativeLogitsArePushedDownByTheRepetitionPenalty) {
  SamplingParams params;
  params.repetition_penalty = 3.0f;
  Sampler sampler(params, std::vector<int32_t>{0, 1});
  std::vector<float> logits = {-0.5f, 1.5f, -1.0f};
  const SampleResult r = sampler.sample(logits);
  EXPECT_EQ(logits, (std::vector<float>{-1.5f, 0.5f, -1.0f}));
  EXPECT_EQ(r.id, 1);
}

TEST(Sampler, FrequencyAndPresencePenaltiesUseCountsOverAllIds) {
  SamplingParams params;
  params.frequency_penalty = 2.0f;
  params.presence_penalty = 0.5f;
  Sampler sampler(params, std::vector<int32_t>{0, 0, 1});
  sampler.observe(0);  // ids: 0, 0, 1, 0 -> count(0) = 3, count(1) = 1, num_ids = 4
  std::vector<float> logits = {3.0f, 1.0f, 1.0f, 0.0f};
  const SampleResult r = sampler.sample(logits);
  // 3 - 2 * 3/4 - 0.5 = 1; 1 - 2 * 1/4 - 0.5 = 0.
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 0.0f, 1.0f, 0.0f}));
  EXPECT_EQ(r.id, 0);  // tie with id 2: lowest id
}

TEST(Sampler, AnyWarperMakesTheChoiceRandomAsInTgi) {
  SamplingParams params;
  params.do_sample = false;
  params.temperature = 0.5f;
  EXPECT_TRUE(Sampler(params, {}).is_random());
  params = SamplingParams{};
  params.top_k = 3;
  EXPECT_TRUE(Sampler(params, {}).is_random());
  params = SamplingParams{};
  params.top_p = 0.9f;
  EXPECT_TRUE(Sampler(params, {}).is_random());
  params = SamplingParams{};
  params.typical_p = 0.9f;
  EXPECT_TRUE(Sampler(params, {}).is_random());
  params = SamplingParams{};
  params.repetition_penalty = 1.5f;  // a processor, not a warper: still greedy
  params.frequency_penalty = 0.5f;
  EXPECT_FALSE(Sampler(params, {}).is_random());
}

TEST(Sampler, TemperatureShapesTheReportedLogprob) {
  SamplingParams params;
  params.do_sample = true;
  params.temperature = 0.5f;
  params.top_k = 1;  // makes the draw certain, so the logprob is checked at a known id
  Sampler sampler(params, {});
  std::vector<float> logits = {1.0f, 0.0f, -1.0f};
  const SampleResult r = sampler.sample(logits);
  EXPECT_EQ(r.id, 0);
  EXPECT_EQ(r.logprob, 0.0f);  // the only survivor
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -kInf, -kInf}));

  params.top_k = 0;
  Sampler untruncated(params, {});
  logits = {1.0f, 0.0f, -1.0f};
  const SampleResult s = untruncated.sample(logits);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, 0.0f, -2.0f}));
  EXPECT_NEAR(s.logprob, log_softmax_at({2.0, 0.0, -2.0}, static_cast<size_t>(s.id)), 1e-6);
}

TEST(Sampler, TopNTokensIncludeEveryTieAtTheNthValue) {
  SamplingParams params;
  params.top_n_tokens = 3;
  Sampler sampler(params, {});
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, 2.0f, 0.0f};
  const SampleResult r = sampler.sample(logits);
  const std::vector<double> l = {1, 3, 2, 3, 2, 0};
  // 3rd best value is 2.0, held by ids 2 and 4: four tokens come back, best first, ties by id.
  ASSERT_EQ(r.top_tokens.size(), 4u);
  const int32_t expected_ids[] = {1, 3, 2, 4};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.top_tokens[i].id, expected_ids[i]);
    EXPECT_NEAR(r.top_tokens[i].logprob, log_softmax_at(l, static_cast<size_t>(expected_ids[i])),
                1e-6);
  }
  EXPECT_EQ(r.id, 1);
  EXPECT_EQ(r.logprob, r.top_tokens[0].logprob);
}

TEST(Sampler, TopNTokensExactlyNWithoutTiesAndNeverFilteredOnes) {
  SamplingParams params;
  params.top_n_tokens = 2;
  Sampler exact(params, {});
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f};
  SampleResult r = exact.sample(logits);
  ASSERT_EQ(r.top_tokens.size(), 2u);
  EXPECT_EQ(r.top_tokens[0].id, 1);
  EXPECT_EQ(r.top_tokens[1].id, 2);

  params.top_n_tokens = 5;
  params.top_k = 2;
  params.seed = 3;
  Sampler filtered(params, {});
  logits = {1.0f, 3.0f, 2.0f, 0.0f};
  r = filtered.sample(logits);
  ASSERT_EQ(r.top_tokens.size(), 2u);  // only two tokens survive top-k
  EXPECT_EQ(r.top_tokens[0].id, 1);
  EXPECT_EQ(r.top_tokens[1].id, 2);
  EXPECT_NEAR(r.top_tokens[0].logprob, log_softmax_at({3.0, 2.0}, 0), 1e-6);
}

TEST(Sampler, SeededDrawsMatchAnIndependentImplementation) {
  // Python transcription (xoshiro256** + inverse CDF over expf weights in id order), seed 7;
  // p = [0.0321, 0.0871, 0.2369, 0.6439] and no uniform lands within 1e-3 of a boundary.
  SamplingParams params;
  params.do_sample = true;
  params.seed = 7;
  Sampler sampler(params, {});
  const int32_t expected[] = {3, 2, 3, 3, 3, 3, 1, 1, 3, 2, 3, 3};
  for (int32_t want : expected) {
    std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
    EXPECT_EQ(sampler.sample(logits).id, want);
  }
}

// A vocabulary of many stretches (the draw walks stretches of 256 ids) with -inf ids among them:
// the same ids as a plain inverse CDF over expf weights in id order, from the same generator.
TEST(Sampler, SeededDrawsOverALargeVocabularyMatchAPlainInverseCdf) {
  constexpr size_t n = 49152 + 37;
  SamplingParams params;
  params.do_sample = true;
  params.seed = 11;
  Sampler sampler(params, {});
  Random random(11);
  for (int step = 0; step < 200; ++step) {
    std::vector<float> logits(n);
    for (size_t i = 0; i < n; ++i)
      logits[i] =
          static_cast<float>((i * 7919 + static_cast<size_t>(step) * 104729) % 1000) / 90.0f;
    for (size_t i = static_cast<size_t>(step); i < n; i += 97) logits[i] = -kInf;
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (float x : logits) sum += std::exp(x - max);
    const double target = random.next_double() * sum;
    double running = 0.0;
    int32_t want = -1;
    for (size_t i = 0; i < n && want < 0; ++i) {
      running += std::exp(logits[i] - max);
      if (running > target) want = static_cast<int32_t>(i);
    }
    ASSERT_EQ(sampler.sample(logits).id, want) << step;
  }
}

std::vector<int32_t> draw_sequence(uint64_t seed, int n) {
  SamplingParams params;
  params.do_sample = true;
  params.seed = seed;
  Sampler sampler(params, {});
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) {
    std::vector<float> logits(64, 0.0f);
    for (size_t j = 0; j < logits.size(); ++j) logits[j] = static_cast<float>((j * 37 + i) % 11);
    ids.push_back(sampler.sample(logits).id);
    sampler.observe(ids.back());
  }
  return ids;
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  EXPECT_EQ(draw_sequence(1234, 50), draw_sequence(1234, 50));
  EXPECT_NE(draw_sequence(1234, 50), draw_sequence(1235, 50));
}

TEST(Sampler, EmpiricalFrequenciesMatchTheProcessedDistribution) {
  SamplingParams params;
  params.do_sample = true;
  params.temperature = 0.8f;
  params.top_k = 4;
  params.seed = 2024;
  Sampler sampler(params, {});
  const std::vector<float> raw = {0.3f, 1.2f, -0.4f, 0.9f, 2.0f, 0.1f};
  // Processed by hand: /0.8 -> {0.375, 1.5, -0.5, 1.125, 2.5, 0.125}; top-4 keeps ids 0,1,3,4.
  std::vector<double> processed = {0.375, 1.5, -kInf, 1.125, 2.5, -kInf};
  double sum = 0.0;
  for (double x : processed) sum += std::exp(x);
  constexpr int kDraws = 20000;
  std::vector<int> counts(raw.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    std::vector<float> logits = raw;
    ++counts[static_cast<size_t>(sampler.sample(logits).id)];
  }
  for (size_t id = 0; id < raw.size(); ++id) {
    const double p = std::exp(processed[id]) / sum;
    const double frequency = static_cast<double>(counts[id]) / kDraws;
    // 4 standard deviations (~0.014 at p = 0.5); deterministic for this seed, so never flaky.
    EXPECT_NEAR(frequency, p, 4.0 * std::sqrt(p * (1.0 - p) / kDraws) + 1e-12) << "id " << id;
  }
  EXPECT_EQ(counts[2], 0);
  EXPECT_EQ(counts[5], 0);
}

TEST(Sampler, NanLogitsAreNeverChosen) {
  const float nan = std::nanf("");
  Sampler greedy(SamplingParams{}, {});
  std::vector<float> logits = {nan, 1.0f, nan, 0.5f};
  SampleResult r = greedy.sample(logits);
  EXPECT_EQ(r.id, 1);
  EXPECT_NEAR(r.logprob, log_softmax_at({1.0, 0.5}, 0), 1e-6);

  SamplingParams params;
  params.do_sample = true;
  params.top_p = 0.9f;
  params.top_n_tokens = 4;
  params.seed = 11;
  Sampler sampled(params, {});
  for (int i = 0; i < 200; ++i) {
    logits = {nan, 0.0f, nan, 0.1f};
    r = sampled.sample(logits);
    EXPECT_TRUE(r.id == 1 || r.id == 3) << r.id;
    EXPECT_TRUE(std::isfinite(r.logprob));
    EXPECT_EQ(r.top_tokens.size(), 2u);
  }
}

TEST(Sampler, AllMinusInfOrNanGivesIdZeroWithMinusInfLogprob) {
  const float nan = std::nanf("");
  for (bool do_sample : {false, true}) {
    SamplingParams params;
    params.do_sample = do_sample;
    params.top_p = do_sample ? 0.5f : 1.0f;
    params.top_n_tokens = 3;
    Sampler sampler(params, {});
    std::vector<float> logits = {nan, -kInf, nan};
    const SampleResult r = sampler.sample(logits);
    EXPECT_EQ(r.id, 0);
    EXPECT_EQ(r.logprob, -kInf);
    EXPECT_TRUE(r.top_tokens.empty());
  }
}

TEST(Sampler, PlusInfLogitsShareTheMass) {
  Sampler sampler(SamplingParams{}, {});
  std::vector<float> logits = {0.0f, kInf, 1.0f, kInf};
  const SampleResult r = sampler.sample(logits);
  EXPECT_EQ(r.id, 1);
  EXPECT_NEAR(r.logprob, -std::log(2.0), 1e-6);
}

}  // namespace
}  // namespace lm
