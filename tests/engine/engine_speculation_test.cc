// Engine with speculation over a fake executor that verifies proposals as the model executor
// does: the same tokens with and without it, several tokens a step delivered in order, and a
// sink that stops a sequence in the middle of a step's tokens gets none after.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace lm {
namespace {

// The fake model: mostly repeats the token four back (so proposals are often right), but says 9
// at every seventh position and 1 after a 9 (so they are not always).
int32_t next_token(const std::vector<int32_t>& tokens) {
  if (tokens.size() % 7 == 0) return 9;
  if (tokens.back() == 9) return 1;
  return tokens.size() < 4 ? 9 : tokens[tokens.size() - 4];
}

class VerifyingExecutor : public Executor {
 public:
  Status check_request(const EngineRequest&) const override { return {}; }
  Result<std::vector<SampleResult>> execute(const ScheduledBatch& batch) override {
    std::vector<SampleResult> out;
    for (const ScheduledSequence& entry : batch.sequences) {
      if (!entry.samples) continue;
      std::vector<int32_t> context = entry.sequence->token_ids;
      for (size_t r = 0; r <= entry.proposed_ids.size(); ++r) {
        if (r > 0) context.push_back(entry.proposed_ids[r - 1]);
        SampleResult token;
        token.id = next_token(context);
        out.push_back(token);
        if (r == entry.proposed_ids.size() || token.id != entry.proposed_ids[r]) break;
      }
    }
    return out;
  }
  void release(int64_t) override {}
};

class Sink : public TokenSink {
 public:
  explicit Sink(int64_t stop_after = -1) : stop_after_(stop_after) {}
  bool on_token(const TokenEvent& event) override {
    std::lock_guard lock(mutex_);
    EXPECT_FALSE(done_) << "a token after the end";
    ids_.push_back(event.token.id);
    const bool stop = static_cast<int64_t>(ids_.size()) == stop_after_;
    if (event.finish_reason || stop) {
      done_ = true;
      cv_.notify_all();
    }
    return !stop;
  }
  void on_error(const std::string&) override { ADD_FAILURE() << "an error"; }
  bool cancelled() const override { return false; }
  std::vector<int32_t> wait() {
    std::unique_lock lock(mutex_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return done_; }));
    return ids_;
  }

 private:
  int64_t stop_after_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<int32_t> ids_;
};

struct Generation {
  std::vector<std::vector<int32_t>> outputs;
  EngineStats stats;
  std::vector<RequestSpeculation> finished;  // the steps' StepStats::finished_speculation
};

Generation generate(int64_t speculate, int64_t stop_after = -1) {
  EngineConfig config;
  config.block_size = 4;
  config.speculate = speculate;
  Generation result;
  // The observer runs on the engine thread; drain() joins it before `finished` is read.
  Engine engine(config, std::make_unique<VerifyingExecutor>(), [&](const StepStats& stats) {
    result.finished.insert(result.finished.end(), stats.finished_speculation.begin(),
                           stats.finished_speculation.end());
  });
  std::vector<std::shared_ptr<Sink>> sinks;
  for (int32_t first : {2, 3, 4}) {
    EngineRequest request;
    request.prompt_ids = {first, 5, 6, 7, first, 5};
    request.max_new_tokens = 30 + first;
    sinks.push_back(std::make_shared<Sink>(stop_after));
    EXPECT_TRUE(engine.submit(request, sinks.back()).ok());
  }
  for (const auto& sink : sinks) result.outputs.push_back(sink->wait());
  engine.drain();
  result.stats = engine.stats();
  return result;
}

TEST(EngineSpeculation, GivesTheTokensOfPlainDecoding) {
  const Generation plain = generate(0);
  const Generation speculative = generate(3);
  EXPECT_EQ(speculative.outputs, plain.outputs);
  EXPECT_EQ(plain.stats.num_proposed_tokens, 0);
  EXPECT_GT(speculative.stats.num_accepted_tokens, 20);
  EXPECT_LT(speculative.stats.num_accepted_tokens, speculative.stats.num_proposed_tokens);
  // Accepted proposals are tokens without a step of their own.
  EXPECT_LT(speculative.stats.total_steps, plain.stats.total_steps);
  // Each finished request's totals, and together the engine's.
  ASSERT_EQ(speculative.finished.size(), 3u);
  RequestSpeculation sum;
  for (const RequestSpeculation& r : speculative.finished) {
    EXPECT_GT(r.num_accepted, 0);
    EXPECT_LE(r.num_accepted, r.num_proposed);
    sum.num_proposed += r.num_proposed;
    sum.num_accepted += r.num_accepted;
  }
  EXPECT_EQ(sum.num_proposed, speculative.stats.num_proposed_tokens);
  EXPECT_EQ(sum.num_accepted, speculative.stats.num_accepted_tokens);
  EXPECT_TRUE(plain.finished.empty());  // without speculation, no histogram of zeros
}

TEST(EngineSpeculation, ASinkThatStopsMidStepGetsNoMoreTokens) {
  for (int64_t stop_after : {3, 7, 10}) {
    const Generation plain = generate(0, stop_after);
    const Generation speculative = generate(3, stop_after);
    EXPECT_EQ(speculative.outputs, plain.outputs);
    for (const std::vector<int32_t>& ids : speculative.outputs)
      EXPECT_EQ(static_cast<int64_t>(ids.size()), stop_after);
    // Requests their sinks stopped are finished requests too.
    EXPECT_EQ(speculative.finished.size(), 3u);
  }
}

}  // namespace
}  // namespace lm
