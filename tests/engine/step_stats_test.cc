// StepStats: the counts of hand-built scheduler batches (admission, chunked prompts, decodes,
// joining a running batch, recompute after preemption), the Engine handing one to its observer
// after each step with the executor's timings and failures, and telling a sink its admission.
#include "engine/step_stats.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler.h"

namespace lm {
namespace {

using namespace std::chrono_literals;

constexpr int32_t kFailingId = 13;  // a batch holding a prompt starting with it fails

EngineRequest request(int64_t prompt_len, int64_t max_new_tokens, int32_t first_id = 100) {
  EngineRequest r;
  for (int64_t i = 0; i < prompt_len; ++i)
    r.prompt_ids.push_back(first_id + static_cast<int32_t>(i));
  r.max_new_tokens = max_new_tokens;
  return r;
}

EngineConfig config(int64_t num_blocks = 64) {
  EngineConfig c;
  c.max_batch_prefill_tokens = 8;
  c.max_batch_total_tokens = 64;
  c.block_size = 4;
  c.num_blocks = num_blocks;
  return c;
}

std::vector<SampleResult> samples_for(const ScheduledBatch& batch) {
  SampleResult token;
  token.id = 1;
  return std::vector<SampleResult>(static_cast<size_t>(batch.num_samples()), token);
}

// (num_sequences, num_admitted, num_prefill_tokens, num_decode_tokens, num_samples)
using Counts = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;

Counts counts(const StepStats& s) {
  return {s.num_sequences, s.num_admitted, s.num_prefill_tokens, s.num_decode_tokens,
          s.num_samples};
}

// Schedules, counts and applies one step.
Counts step(Scheduler& scheduler) {
  const ScheduledBatch batch = scheduler.schedule();
  const Counts c = counts(count_step(batch));
  scheduler.update(batch, samples_for(batch));
  return c;
}

TEST(StepStats, CountsAdmissionsPromptChunksAndDecodes) {
  Scheduler scheduler(config());
  scheduler.add(request(3, 3), nullptr);   // whole prompt in the first step
  scheduler.add(request(10, 3), nullptr);  // 5 of 10 fit the prefill budget of 8
  EXPECT_EQ(step(scheduler), Counts(2, 2, 8, 0, 1));
  // The first decodes, the second's next chunk (5 tokens) ends its prompt: no admission.
  EXPECT_EQ(step(scheduler), Counts(2, 0, 5, 1, 2));
  // A newcomer joins the running batch: one admitted out of three. Its one-token prompt is a
  // prefill although it computes a single token like the decodes beside it.
  scheduler.add(request(1, 1), nullptr);
  EXPECT_EQ(step(scheduler), Counts(3, 1, 1, 2, 3));
  EXPECT_EQ(step(scheduler), Counts(1, 0, 0, 1, 1));  // two finished; the last decodes alone
}

TEST(StepStats, ARecomputeAfterPreemptionCountsAsPrefill) {
  // 4 usable blocks of 4 tokens, no prefix cache: two sequences of 4 prompt tokens each hold 2
  // blocks after 4 decodes; the first's 6th token (position 8) needs a third, so the newest is
  // preempted, and re-admitted once the first has finished.
  EngineConfig c = config(/*num_blocks=*/5);
  c.prefix_caching = false;
  Scheduler scheduler(c);
  scheduler.add(request(4, 6), nullptr);
  scheduler.add(request(4, 6, 200), nullptr);
  EXPECT_EQ(step(scheduler), Counts(2, 2, 8, 0, 2));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(step(scheduler), Counts(2, 0, 0, 2, 2));
  EXPECT_EQ(step(scheduler), Counts(1, 0, 0, 1, 1));  // the second is preempted
  EXPECT_EQ(scheduler.num_preemptions(), 1);
  // Its 9 tokens are recomputed: 8 (the prefill budget) as a prompt chunk, then the newest alone,
  // which is a decode like any other.
  EXPECT_EQ(step(scheduler), Counts(1, 1, 8, 0, 0));
  EXPECT_EQ(step(scheduler), Counts(1, 0, 0, 1, 1));
  EXPECT_FALSE(scheduler.has_work());
}

// Samples id 1 for every sampling entry and reports fixed timings; fails on kFailingId.
class TimedExecutor final : public Executor {
 public:
  Status check_request(const EngineRequest&) const override { return {}; }
  Result<std::vector<SampleResult>> execute(const ScheduledBatch& batch) override {
    for (const ScheduledSequence& entry : batch.sequences)
      if (entry.sequence->request.prompt_ids[0] == kFailingId) return Error{"the step failed"};
    return samples_for(batch);
  }
  void release(int64_t) override {}
  ExecuteTimings last_timings() const override { return {0.25, 0.5, 0.125}; }
};

// Done at its last token or error; counts admissions and tokens.
class CountingSink final : public TokenSink {
 public:
  bool on_token(const TokenEvent& event) override {
    ++num_tokens;
    if (event.finish_reason) finish();
    return true;
  }
  void on_scheduled() override {
    if (num_tokens == 0) ++num_scheduled_before_tokens;
    ++num_scheduled;
  }
  void on_error(const std::string&) override { finish(); }
  bool cancelled() const override { return false; }
  void wait() {
    std::unique_lock lock(mutex_);
    ASSERT_TRUE(done_cv_.wait_for(lock, 10s, [&] { return done_; }));
  }

  // Engine thread only until done.
  int num_tokens = 0;
  int num_scheduled = 0;
  int num_scheduled_before_tokens = 0;

 private:
  void finish() {
    std::lock_guard lock(mutex_);
    done_ = true;
    done_cv_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
};

TEST(StepStats, TheEngineObservesEveryStepAfterItRan) {
  std::mutex mutex;
  std::vector<StepStats> seen;
  Engine engine(config(), std::make_unique<TimedExecutor>(), [&](const StepStats& s) {
    std::lock_guard lock(mutex);
    seen.push_back(s);
  });
  auto ok = std::make_shared<CountingSink>();
  ASSERT_TRUE(engine.submit(request(3, 2), ok).ok());
  ok->wait();
  auto failing = std::make_shared<CountingSink>();
  ASSERT_TRUE(engine.submit(request(3, 2, kFailingId), failing).ok());
  failing->wait();
  engine.drain();  // joins the engine thread: every observer call has returned

  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(counts(seen[0]), Counts(1, 1, 3, 0, 1));
  EXPECT_EQ(counts(seen[1]), Counts(1, 0, 0, 1, 1));
  EXPECT_FALSE(seen[0].failed);
  EXPECT_EQ(seen[0].executor.prepare_seconds, 0.25);
  EXPECT_EQ(seen[0].executor.forward_seconds, 0.5);
  EXPECT_EQ(seen[0].executor.sample_seconds, 0.125);
  EXPECT_GE(seen[0].execute_seconds, 0.0);
  EXPECT_GE(seen[0].deliver_seconds, 0.0);
  EXPECT_TRUE(seen[2].failed);
  EXPECT_EQ(counts(seen[2]), Counts(1, 1, 3, 0, 1));
  // Each sink heard of its admission once, before its first token.
  EXPECT_EQ(ok->num_tokens, 2);
  EXPECT_EQ(ok->num_scheduled, 1);
  EXPECT_EQ(ok->num_scheduled_before_tokens, 1);
  EXPECT_EQ(failing->num_scheduled, 1);
}

}  // namespace
}  // namespace lm
