// The device sampling helpers against the CPU sampler's own functions (runtime/logits_processors,
// runtime/sampler): processors and top-k bit for bit, top-p/typical-p filter sets exactly, and the
// chosen token, its logprob and the top-n alternatives of Sampler::sample for the same uniform.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cuda_test_util.h"
#include "kernels/cuda/logit_processors.h"
#include "kernels/cuda/logit_warpers.h"
#include "kernels/cuda/token_choice.h"
#include "runtime/logits_processors.h"
#include "runtime/random.h"
#include "runtime/sampler.h"

namespace lm::kernels::cuda {
namespace {

using testing::CudaKernelTest;
using testing::DeviceBuffer;

using SamplingTest = CudaKernelTest;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Logits like a model's: normal around 0 with a few strong candidates, values rounded to 1/64 so
// that ties occur (ties are where the boundary rules matter), and some ids already filtered.
std::vector<float> make_logits(int64_t rows, int64_t vocab, uint32_t seed, bool filtered) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<float> logits(rows * vocab);
  for (float& x : logits) x = std::round(normal(rng) * 64.0f) / 64.0f;
  for (int64_t r = 0; r < rows; ++r) {
    for (int i = 0; i < 5; ++i) logits[r * vocab + pick(rng)] += 12.0f;
    if (filtered)
      for (int i = 0; i < 20; ++i) logits[r * vocab + pick(rng)] = kNegInf;
  }
  return logits;
}

std::span<float> row_of(std::vector<float>& logits, int64_t vocab, int64_t r) {
  return std::span<float>(logits.data() + r * vocab, static_cast<size_t>(vocab));
}

TEST_F(SamplingTest, SanitizePenaltiesAndTemperatureAreBitExact) {
  const int64_t rows = 4, vocab = 1000;
  std::vector<float> logits = make_logits(rows, vocab, 60, false);
  logits[3] = std::numeric_limits<float>::quiet_NaN();
  logits[vocab + 7] = std::numeric_limits<float>::infinity();
  // Row r's history: ids with counts (distinct), plus its length.
  const std::vector<std::vector<std::pair<int32_t, int32_t>>> history = {
      {{3, 2}, {10, 1}, {999, 4}}, {{7, 1}, {8, 3}}, {}, {{0, 1}, {500, 2}, {5000, 1}}};
  const std::vector<float> repetition = {1.3f, 1.0f, 1.2f, 0.8f};
  const std::vector<float> frequency = {0.0f, 0.5f, 0.0f, -0.4f};
  const std::vector<float> presence = {0.0f, 0.25f, 1.0f, 0.3f};
  const std::vector<float> temperature = {1.0f, 0.7f, 1.5f, 0.3f};

  std::vector<int32_t> begins = {0}, ids, counts;
  std::vector<int64_t> num_ids;
  std::vector<float> expected = logits;
  for (int64_t r = 0; r < rows; ++r) {
    TokenCountMap map;
    int64_t length = 0;
    for (const auto& [id, count] : history[r]) {
      ids.push_back(id);
      counts.push_back(count);
      map[id] = count;
      length += count;
    }
    begins.push_back(static_cast<int32_t>(ids.size()));
    num_ids.push_back(length);
    auto row = row_of(expected, vocab, r);
    lm::sanitize_scores(row);  // the Sampler's order
    if (repetition[r] != 1.0f) apply_repetition_penalty(row, map, repetition[r]);
    if (frequency[r] != 0.0f || presence[r] != 0.0f)
      apply_frequency_presence_penalty(row, map, length, frequency[r], presence[r]);
    if (temperature[r] != 1.0f) lm::apply_temperature(row, temperature[r]);
  }
  DeviceBuffer<float> d_logits(logits), d_rep(repetition), d_freq(frequency), d_pres(presence),
      d_temp(temperature);
  DeviceBuffer<int32_t> d_begins(begins), d_ids(ids), d_counts(counts);
  DeviceBuffer<int64_t> d_num_ids(num_ids);
  cuda::sanitize_scores(d_logits.get(), rows, vocab, nullptr);
  apply_penalties(d_logits.get(), rows, vocab, d_begins.get(), d_ids.get(), d_counts.get(),
                  d_num_ids.get(), d_rep.get(), d_freq.get(), d_pres.get(), nullptr);
  cuda::apply_temperature(d_logits.get(), rows, vocab, d_temp.get(), nullptr);
  // The same IEEE operations on the same values: identical.
  EXPECT_EQ(d_logits.download(), expected);
}

TEST_F(SamplingTest, TopKKeepsExactlyWhatCpuKeeps) {
  const int64_t vocab = 32000;
  const std::vector<int32_t> top_k = {0, 1, 2, 50, 1000, vocab - 1, vocab, 7};
  const auto rows = static_cast<int64_t>(top_k.size());
  std::vector<float> logits = make_logits(rows, vocab, 61, true);
  std::vector<float> expected = logits;
  ProcessorScratch scratch;
  for (int64_t r = 0; r < rows; ++r)
    if (top_k[r] != 0) lm::apply_top_k(row_of(expected, vocab, r), top_k[r], scratch);
  DeviceBuffer<float> d_logits(logits);
  DeviceBuffer<int32_t> d_k(top_k);
  cuda::apply_top_k(d_logits.get(), rows, vocab, d_k.get(), nullptr);
  EXPECT_EQ(d_logits.download(), expected);  // a select and a mask: exact
}

void check_sorted_warper(bool typical, int64_t vocab, uint32_t seed) {
  const std::vector<float> p = {1.0f, 0.9f, 0.5f, 0.95f, 0.2f, 0.999f, 0.0f};
  const auto rows = static_cast<int64_t>(p.size());
  std::vector<float> logits = make_logits(rows, vocab, seed, true);
  for (int64_t i = 0; i < vocab; ++i) logits[5 * vocab + i] *= 0.05f;  // a flat row
  std::vector<float> expected = logits;
  ProcessorScratch scratch;
  for (int64_t r = 0; r < rows; ++r) {
    if (p[r] >= 1.0f) continue;
    if (typical) {
      lm::apply_typical_p(row_of(expected, vocab, r), p[r], scratch);
    } else {
      lm::apply_top_p(row_of(expected, vocab, r), p[r], scratch);
    }
  }
  DeviceBuffer<float> d_logits(logits), d_p(p);
  const size_t bytes = warper_workspace_bytes(rows, vocab);
  DeviceBuffer<uint8_t> d_work(bytes);
  if (typical) {
    cuda::apply_typical_p(d_logits.get(), rows, vocab, d_p.get(), d_work.get(), bytes, nullptr);
  } else {
    cuda::apply_top_p(d_logits.get(), rows, vocab, d_p.get(), d_work.get(), bytes, nullptr);
  }
  // Surviving scores are untouched, so equality means the same filter set. The probabilities use
  // CUDA's expf (within 2 ulp of glibc's) and are summed in another order, so only a token whose
  // cumulative mass sits within ~1e-7 of the threshold could flip: none does on this seeded data.
  EXPECT_EQ(d_logits.download(), expected)
      << (typical ? "typical_p" : "top_p") << " vocab " << vocab;
}

TEST_F(SamplingTest, TopPMatchesCpuFilterSets) {
  check_sorted_warper(false, 32000, 62);
  check_sorted_warper(false, 151936, 63);
  check_sorted_warper(false, 100, 64);
}

TEST_F(SamplingTest, TypicalPMatchesCpuFilterSets) {
  check_sorted_warper(true, 32000, 65);
  check_sorted_warper(true, 128256, 66);
  check_sorted_warper(true, 100, 67);
}

TEST_F(SamplingTest, ChoiceLogprobAndTopNMatchTheSampler) {
  const int64_t vocab = 50257, rows = 6;
  const int32_t top_n = 4;
  std::vector<float> logits = make_logits(rows, vocab, 68, true);
  for (int64_t i = 0; i < vocab; ++i) logits[4 * vocab + i] = kNegInf;  // nothing left
  logits[5 * vocab + 9] = logits[5 * vocab + 11] = 40.0f;               // a tie for the max
  std::vector<uint8_t> is_random(rows);
  std::vector<double> uniforms(rows);
  std::vector<SampleResult> expected;
  for (int64_t r = 0; r < rows; ++r) {
    SamplingParams params;
    params.do_sample = r % 2 == 1;
    params.seed = 1000 + static_cast<uint64_t>(r);
    params.top_n_tokens = top_n;
    Sampler sampler(params, {});
    std::vector<float> row(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
    expected.push_back(sampler.sample(row));
    is_random[r] = params.do_sample ? 1 : 0;
    Random random(params.seed);  // the draw the Sampler made with its fresh generator
    uniforms[r] = random.next_double();
  }
  DeviceBuffer<float> d_logits(logits), d_max(rows), d_log_sum(rows), d_logprobs(rows),
      d_top_logprobs(rows * top_n);
  DeviceBuffer<int32_t> d_argmax(rows), d_ids(rows), d_top_ids(rows * top_n), d_counts(rows);
  DeviceBuffer<double> d_sum(rows), d_uniforms(uniforms);
  DeviceBuffer<uint8_t> d_random(is_random);
  const RowSoftmaxStats stats{d_max.get(), d_argmax.get(), d_sum.get(), d_log_sum.get()};
  log_softmax_stats(d_logits.get(), rows, vocab, stats, nullptr);
  choose_tokens(d_logits.get(), rows, vocab, stats, d_random.get(), d_uniforms.get(), d_ids.get(),
                d_logprobs.get(), nullptr);
  top_n_logprobs(d_logits.get(), rows, vocab, top_n, stats, d_top_ids.get(), d_top_logprobs.get(),
                 d_counts.get(), nullptr);
  const auto ids = d_ids.download();
  const auto logprobs = d_logprobs.download();
  const auto top_ids = d_top_ids.download();
  const auto top_logprobs = d_top_logprobs.download();
  const auto counts = d_counts.download();
  for (int64_t r = 0; r < rows; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    EXPECT_EQ(ids[r], expected[r].id);
    // log(sum_exp) from a differently ordered double sum: equal to within an fp32 ulp or two.
    if (std::isinf(expected[r].logprob)) {
      EXPECT_EQ(logprobs[r], expected[r].logprob);
    } else {
      EXPECT_NEAR(logprobs[r], expected[r].logprob,
                  2e-6f * (1.0f + std::fabs(expected[r].logprob)));
    }
    // The CPU lists ties with the n-th too; its first n entries are the device's list.
    const size_t n = std::min<size_t>(top_n, expected[r].top_tokens.size());
    ASSERT_EQ(static_cast<size_t>(counts[r]), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(top_ids[r * top_n + i], expected[r].top_tokens[i].id);
      EXPECT_NEAR(top_logprobs[r * top_n + i], expected[r].top_tokens[i].logprob,
                  2e-6f * (1.0f + std::fabs(expected[r].top_tokens[i].logprob)));
    }
  }
}

}  // namespace
}  // namespace lm::kernels::cuda
