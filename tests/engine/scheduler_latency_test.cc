// Scheduler under --max-step-latency-ms, with a fixed cost model (1 ms per prompt token, 1 ms per
// decoding row): prompt chunks sized so the predicted step stays within the target, decodes never
// skipped, a short prompt arriving behind a long one admitted in the next step, the long one
// progressing every step to the end, the prefill budget a hard cap, the whole budget for a lone
// prompt, a floor chunk when the decodes alone fill the target, and 0 keeping today's batches.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "engine/scheduler.h"
#include "engine/step_stats.h"

#include "scheduled_entries.h"

namespace lm {
namespace {

using testing_helpers::entries;
using testing_helpers::Entry;
using testing_helpers::request;

constexpr StepCostModel::Coefficients kOneMsPerRow{
    .intercept = 0, .per_prefill_token = 0.001, .per_decode_row = 0.001, .per_attended_token = 0};

Scheduler latency_scheduler(int64_t target_ms, int64_t prefill_tokens = 100,
                            StepCostModel::Coefficients cost = kOneMsPerRow) {
  EngineConfig c;
  c.max_batch_prefill_tokens = prefill_tokens;
  c.max_batch_total_tokens = 1000;
  c.block_size = 4;
  c.num_blocks = 64;
  c.max_step_latency_ms = target_ms;
  c.min_prefill_chunk_tokens = 4;
  Scheduler scheduler(c);
  scheduler.cost_model() = StepCostModel::fixed(cost);
  return scheduler;
}

// Schedules and applies one step (every sampled token is 1, never EOS); returns its batch
// entries and the predicted seconds of its shape.
std::pair<std::vector<Entry>, double> step(Scheduler& scheduler) {
  const ScheduledBatch batch = scheduler.schedule();
  const StepStats stats = count_step(batch);
  std::vector<SampleResult> samples(static_cast<size_t>(batch.num_samples()));
  for (SampleResult& s : samples) s.id = 1;
  const std::vector<Entry> e = entries(batch);
  scheduler.update(batch, samples);
  EXPECT_TRUE(scheduler.check_invariants().ok());
  return {e, scheduler.cost_model().predict_seconds(stats.shape())};
}

TEST(SchedulerLatency, ChunksKeepThePredictedStepWithinTheTargetWhileOthersDecode) {
  Scheduler scheduler = latency_scheduler(/*target_ms=*/10);
  scheduler.add(request(3, 100), nullptr);
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 0, 3, true}}));
  scheduler.add(request(40, 2, 200), nullptr);
  // One decoding row (1 ms) leaves 9 ms: a 9-token chunk.
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 3, 1, true}, {1, 0, 9, false}}));
  // Then the floor of 4 and 5 more within the target, every step, until the prompt ends.
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 4, 1, true}, {1, 9, 9, false}}));
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 5, 1, true}, {1, 18, 9, false}}));
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 6, 1, true}, {1, 27, 9, false}}));
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 7, 1, true}, {1, 36, 4, true}}));
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 8, 1, true}, {1, 40, 1, true}}));
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 9, 1, true}}));
}

TEST(SchedulerLatency, AShortPromptBehindALongOneJoinsTheNextStepAndBothFinish) {
  Scheduler scheduler = latency_scheduler(/*target_ms=*/10);
  scheduler.add(request(3, 100), nullptr);
  step(scheduler);
  scheduler.add(request(200, 1, 200), nullptr);  // long
  step(scheduler);
  scheduler.add(request(5, 3, 500), nullptr);  // short, arriving while the long one prefills
  auto [batch, predicted] = step(scheduler);
  // The long prompt keeps its floor chunk; the short one takes the 5 ms left, whole.
  EXPECT_EQ(batch, (std::vector<Entry>{{0, 4, 1, true}, {1, 9, 4, false}, {2, 0, 5, true}}));
  EXPECT_LE(predicted, 0.010 + 1e-12);
  int64_t num_steps = 0;
  bool long_done = false;
  while (scheduler.num_running() > 1 && num_steps < 200) {
    auto [e, p] = step(scheduler);
    ++num_steps;
    EXPECT_LE(p, 0.010 + 1e-12);
    ASSERT_GE(e.size(), 2u);
    EXPECT_EQ(std::get<0>(e[0]), 0) << "the decoding sequence is never skipped";
    for (const Entry& entry : e) long_done |= std::get<0>(entry) == 1 && std::get<3>(entry);
  }
  EXPECT_TRUE(long_done);
  EXPECT_EQ(scheduler.num_waiting(), 0);
}

TEST(SchedulerLatency, ALonePromptTakesTheWholeBudgetANewcomerCapsTheStep) {
  Scheduler scheduler = latency_scheduler(/*target_ms=*/10, /*prefill_tokens=*/64);
  scheduler.add(request(100, 1), nullptr);
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 0, 64, false}}));
  // A prompt arriving now joins the next step, and the step keeps within the target although
  // nothing decodes yet: the newcomer's first token is as urgent as a decode.
  scheduler.add(request(5, 1, 300), nullptr);
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 64, 5, false}, {1, 0, 5, true}}));
  // Alone again: the whole budget.
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 69, 31, true}}));
}

TEST(SchedulerLatency, PromptsArrivingTogetherShareTheTargetEvenWithNothingDecoding) {
  Scheduler scheduler = latency_scheduler(/*target_ms=*/10, /*prefill_tokens=*/64);
  scheduler.add(request(30, 1), nullptr);
  scheduler.add(request(30, 1, 300), nullptr);
  // The first gets the 10 ms; the second no longer fits its floor and waits a step.
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 0, 10, false}}));
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 10, 4, false}, {1, 0, 6, false}}));
}

TEST(SchedulerLatency, DecodesFillingTheTargetStillLeaveEachPromptAFloorChunk) {
  // 20 ms a decoding row: the decodes alone are over the 10 ms target.
  Scheduler scheduler = latency_scheduler(
      /*target_ms=*/10, 100,
      {.intercept = 0,
       .per_prefill_token = 0.001,
       .per_decode_row = 0.02,
       .per_attended_token = 0});
  scheduler.add(request(3, 100), nullptr);
  step(scheduler);
  scheduler.add(request(12, 1, 200), nullptr);
  scheduler.add(request(6, 1, 300), nullptr);
  // The first waiting prompt gets the floor; the next one no longer fits.
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 3, 1, true}, {1, 0, 4, false}}));
  EXPECT_EQ(step(scheduler).first,
            (std::vector<Entry>{{0, 4, 1, true}, {1, 4, 4, false}, {2, 0, 4, false}}));
  EXPECT_EQ(step(scheduler).first,
            (std::vector<Entry>{{0, 5, 1, true}, {1, 8, 4, true}, {2, 4, 2, true}}));
}

TEST(SchedulerLatency, MaxBatchPrefillTokensStaysAHardCap) {
  // Everything is cheap: only max_batch_prefill_tokens (8) bounds the prompt tokens.
  Scheduler scheduler = latency_scheduler(
      /*target_ms=*/1000, /*prefill_tokens=*/8,
      {.intercept = 0, .per_prefill_token = 1e-6, .per_decode_row = 1e-6, .per_attended_token = 0});
  scheduler.add(request(3, 100), nullptr);
  step(scheduler);
  scheduler.add(request(30, 1, 200), nullptr);
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 3, 1, true}, {1, 0, 8, false}}));
  scheduler.add(request(6, 1, 300), nullptr);
  // Floor 4 for the long one, 4 of the short one's 6, nothing left to extend the long one.
  EXPECT_EQ(step(scheduler).first,
            (std::vector<Entry>{{0, 4, 1, true}, {1, 8, 4, false}, {2, 0, 4, false}}));
}

TEST(SchedulerLatency, ZeroTargetKeepsTodaysFifoChunks) {
  Scheduler scheduler = latency_scheduler(/*target_ms=*/0, /*prefill_tokens=*/16);
  scheduler.add(request(3, 100), nullptr);
  step(scheduler);
  scheduler.add(request(40, 1, 200), nullptr);
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 3, 1, true}, {1, 0, 16, false}}));
  scheduler.add(request(5, 1, 300), nullptr);
  // The long prompt takes the whole budget first; the short one waits for its last chunk.
  EXPECT_EQ(step(scheduler).first, (std::vector<Entry>{{0, 4, 1, true}, {1, 16, 16, false}}));
  EXPECT_EQ(step(scheduler).first,
            (std::vector<Entry>{{0, 5, 1, true}, {1, 32, 8, true}, {2, 0, 5, true}}));
}

}  // namespace
}  // namespace lm
