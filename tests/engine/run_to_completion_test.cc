// run_to_completion over an Engine with a fake executor: the tokens and the engine's finish
// reason (length, EOS), a stop by the callback, and the engine's refusals and failures as errors.
#include "engine/run_to_completion.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace lm {
namespace {

constexpr int32_t kEosId = 2;
constexpr int32_t kFailingId = 13;  // a prompt starting with it fails its step

// Samples id 100 + position, or EOS once the sequence reaches position 5 when the prompt starts
// with kEosId.
class CountingExecutor final : public Executor {
 public:
  Status check_request(const EngineRequest& request) const override {
    if (request.prompt_ids[0] < 0) return Error{"negative id"};
    return {};
  }
  Result<std::vector<SampleResult>> execute(const ScheduledBatch& batch) override {
    std::vector<SampleResult> out;
    for (const ScheduledSequence& entry : batch.sequences) {
      const int32_t first_id = entry.sequence->request.prompt_ids[0];
      if (first_id == kFailingId) return Error{"the step failed"};
      if (!entry.samples) continue;
      const int64_t position = entry.first_position + entry.num_tokens;
      SampleResult token;
      token.id =
          first_id == kEosId && position == 5 ? kEosId : 100 + static_cast<int32_t>(position);
      out.push_back(token);
    }
    return out;
  }
  void release(int64_t) override {}
};

EngineConfig config() {
  EngineConfig c;
  c.max_batch_total_tokens = 64;
  c.eos_token_ids = {kEosId};
  return c;
}

std::vector<int32_t> ids_of(const GenerationResult& r) {
  std::vector<int32_t> ids;
  for (const SampleResult& t : r.tokens) ids.push_back(t.id);
  return ids;
}

EngineRequest request(int32_t first_id, int64_t max_new_tokens) {
  EngineRequest r;
  r.prompt_ids = {first_id, 7, 7};
  r.max_new_tokens = max_new_tokens;
  return r;
}

TEST(RunToCompletion, ReturnsEveryTokenAndTheEnginesFinishReason) {
  Engine engine(config(), std::make_unique<CountingExecutor>());
  Result<GenerationResult> length = run_to_completion(engine, request(1, 4));
  ASSERT_TRUE(length.ok()) << length.error().message;
  EXPECT_EQ(ids_of(*length), (std::vector<int32_t>{103, 104, 105, 106}));
  EXPECT_EQ(length->finish_reason, FinishReason::kLength);

  Result<GenerationResult> eos = run_to_completion(engine, request(kEosId, 10));
  ASSERT_TRUE(eos.ok()) << eos.error().message;
  EXPECT_EQ(ids_of(*eos), (std::vector<int32_t>{103, 104, kEosId}));
  EXPECT_EQ(eos->finish_reason, FinishReason::kEosToken);
}

TEST(RunToCompletion, TheCallbackSeesEachTokenAndMayStop) {
  Engine engine(config(), std::make_unique<CountingExecutor>());
  std::vector<int32_t> seen;
  auto stop_at_105 = [&](const SampleResult& t) {
    seen.push_back(t.id);
    return t.id != 105;
  };
  Result<GenerationResult> stopped = run_to_completion(engine, request(1, 10), stop_at_105);
  ASSERT_TRUE(stopped.ok()) << stopped.error().message;
  EXPECT_EQ(ids_of(*stopped), (std::vector<int32_t>{103, 104, 105}));
  EXPECT_EQ(seen, ids_of(*stopped));
  EXPECT_EQ(stopped->finish_reason, FinishReason::kStopSequence);

  // A stop on the token that reaches max_new_tokens: length comes first (TGI's order).
  Result<GenerationResult> last = run_to_completion(engine, request(1, 3), stop_at_105);
  ASSERT_TRUE(last.ok()) << last.error().message;
  EXPECT_EQ(ids_of(*last), (std::vector<int32_t>{103, 104, 105}));
  EXPECT_EQ(last->finish_reason, FinishReason::kLength);
}

TEST(RunToCompletion, RefusalsAndFailuresAreErrors) {
  Engine engine(config(), std::make_unique<CountingExecutor>());
  Result<GenerationResult> refused = run_to_completion(engine, request(-1, 4));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "negative id");
  Result<GenerationResult> failed = run_to_completion(engine, request(kFailingId, 4));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message, "the step failed");
  engine.drain();
  Result<GenerationResult> closed = run_to_completion(engine, request(1, 4));
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.error().message, Engine::kShuttingDownMessage);
}

}  // namespace
}  // namespace lm
