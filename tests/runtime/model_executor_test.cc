// ModelExecutor under the Engine with a real tiny checkpoint: interleaved concurrent requests give
// exactly the tokens each gets alone from the single-sequence Generator; warm-up runs.
#include "runtime/model_executor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "runtime/generator.h"
#include "runtime/warmup.h"

namespace lm {
namespace {

const std::string kModelPath = std::string(LM_BUILD_ROOT) + "/test-models/llama_mha_untied";

class CollectingSink : public TokenSink {
 public:
  bool on_token(const TokenEvent& event) override {
    std::lock_guard lock(mutex_);
    tokens_.push_back(event.token);
    if (event.finish_reason) {
      finish_reason_ = event.finish_reason;
      done_ = true;
      cv_.notify_all();
    }
    return true;
  }
  void on_error(const std::string& message) override {
    std::lock_guard lock(mutex_);
    error_ = message;
    done_ = true;
    cv_.notify_all();
  }
  bool cancelled() const override { return false; }

  // The finished result, or an error message as the failure.
  GenerationResult wait() {
    std::unique_lock lock(mutex_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(60), [&] { return done_; }));
    EXPECT_EQ(error_, "");
    return GenerationResult{tokens_, finish_reason_.value_or(FinishReason::kStopSequence)};
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<SampleResult> tokens_;
  std::optional<FinishReason> finish_reason_;
  std::string error_;
};

class ModelExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = LlamaModel::load(kModelPath);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message << " (run `make fixtures-test`)";
    model_ = std::move(loaded).value().release();
    pool_ = new ThreadPool(2);
  }
  static void TearDownTestSuite() {
    delete model_;
    delete pool_;
  }

  // Three requests of different lengths and sampling rules, one of them seeded sampling.
  static std::vector<EngineRequest> requests() {
    std::vector<EngineRequest> out(3);
    out[0].prompt_ids = {1, 17, 250, 3, 99};
    out[0].max_new_tokens = 12;
    out[1].prompt_ids = {1, 5, 6, 7, 8, 300, 301, 302, 40, 41, 42};
    out[1].max_new_tokens = 16;
    out[1].sampling.repetition_penalty = 1.3f;
    out[1].sampling.top_n_tokens = 3;
    out[1].ignore_eos = true;
    out[2].prompt_ids = {1, 383, 0};
    out[2].max_new_tokens = 10;
    out[2].sampling.do_sample = true;
    out[2].sampling.seed = 42;
    out[2].sampling.temperature = 0.8f;
    out[2].sampling.top_k = 20;
    return out;
  }

  static GenerationResult generate_alone(const EngineRequest& request) {
    Generator generator(*model_, *pool_);
    GenerationRequest g;
    g.prompt_ids = request.prompt_ids;
    g.sampling = request.sampling;
    g.max_new_tokens = request.max_new_tokens;
    g.ignore_eos = request.ignore_eos;
    Result<GenerationResult> result = generator.generate(g);
    EXPECT_TRUE(result.ok());
    return std::move(result).value();
  }

  // Submits every request from its own thread at once and collects the results.
  static std::vector<GenerationResult> generate_together(const std::vector<EngineRequest>& reqs,
                                                         int64_t max_batch_prefill_tokens) {
    EngineConfig config;
    config.max_batch_prefill_tokens = max_batch_prefill_tokens;
    config.max_batch_total_tokens = 1024;
    config.eos_token_ids = model_->config().eos_token_ids;
    auto executor = std::make_unique<ModelExecutor>(*model_, *pool_);
    ModelExecutor* executor_ptr = executor.get();
    Engine engine(config, std::move(executor));
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    for (size_t i = 0; i < reqs.size(); ++i) sinks.push_back(std::make_shared<CollectingSink>());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < reqs.size(); ++i)
      threads.emplace_back([&, i] { EXPECT_TRUE(engine.submit(reqs[i], sinks[i]).ok()); });
    for (std::thread& t : threads) t.join();
    std::vector<GenerationResult> results;
    for (const auto& sink : sinks) results.push_back(sink->wait());
    engine.drain();
    EXPECT_EQ(executor_ptr->num_sequences(), 0);  // every cache and sampler was released
    EXPECT_EQ(engine.stats().num_running, 0);
    return results;
  }

  static LlamaModel* model_;
  static ThreadPool* pool_;
};

LlamaModel* ModelExecutorTest::model_ = nullptr;
ThreadPool* ModelExecutorTest::pool_ = nullptr;

std::vector<int32_t> ids_of(const GenerationResult& r) {
  std::vector<int32_t> ids;
  for (const SampleResult& t : r.tokens) ids.push_back(t.id);
  return ids;
}

TEST_F(ModelExecutorTest, InterleavedRequestsMatchEachRunAlone) {
  const std::vector<EngineRequest> reqs = requests();
  std::vector<GenerationResult> alone;
  for (const EngineRequest& r : reqs) alone.push_back(generate_alone(r));
  const std::vector<GenerationResult> together = generate_together(reqs, 4096);
  ASSERT_EQ(together.size(), alone.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(ids_of(together[i]), ids_of(alone[i]));
    EXPECT_EQ(together[i].finish_reason, alone[i].finish_reason);
    ASSERT_EQ(together[i].tokens.size(), alone[i].tokens.size());
    for (size_t t = 0; t < alone[i].tokens.size(); ++t) {
      // Same forwards on the same rows: bit-identical, not merely close.
      EXPECT_EQ(together[i].tokens[t].logprob, alone[i].tokens[t].logprob);
      ASSERT_EQ(together[i].tokens[t].top_tokens.size(), alone[i].tokens[t].top_tokens.size());
      for (size_t k = 0; k < alone[i].tokens[t].top_tokens.size(); ++k)
        EXPECT_EQ(together[i].tokens[t].top_tokens[k].id, alone[i].tokens[t].top_tokens[k].id);
    }
  }
  EXPECT_EQ(alone[1].tokens.size(), 16u);
  EXPECT_EQ(alone[1].tokens[0].top_tokens.size(), 3u);
}

TEST_F(ModelExecutorTest, ChunkedPrefillGivesTheSameTokens) {
  const std::vector<EngineRequest> reqs = requests();
  // A prefill budget of 4: every prompt but the shortest is computed in several chunks.
  const std::vector<GenerationResult> chunked = generate_together(reqs, 4);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    const GenerationResult alone = generate_alone(reqs[i]);
    EXPECT_EQ(ids_of(chunked[i]), ids_of(alone));
    ASSERT_EQ(chunked[i].tokens.size(), alone.tokens.size());
    for (size_t t = 0; t < alone.tokens.size(); ++t)
      EXPECT_NEAR(chunked[i].tokens[t].logprob, alone.tokens[t].logprob, 1e-4);
  }
}

TEST_F(ModelExecutorTest, CheckRequestRejectsIdsOutsideTheVocabularyAndOverlongRequests) {
  ModelExecutor executor(*model_, *pool_);
  EngineRequest r;
  r.prompt_ids = {1, 384};
  r.max_new_tokens = 4;
  Status bad_id = executor.check_request(r);
  ASSERT_FALSE(bad_id.ok());
  EXPECT_EQ(bad_id.error().message, "prompt token id 384 is outside the vocabulary");
  r.prompt_ids = {1, 383};
  EXPECT_TRUE(executor.check_request(r).ok());
  r.max_new_tokens = 255;  // 2 + 255 > 256 positions
  Status too_long = executor.check_request(r);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().message,
            "prompt (2 tokens) + max_new_tokens (255) exceeds the model's context of 256 tokens");
}

TEST_F(ModelExecutorTest, WarmUpRunsAForwardAndRejectsAnEmptyPrompt) {
  EXPECT_TRUE(warm_up(*model_, *pool_, 64).ok());
  EXPECT_TRUE(warm_up(*model_, *pool_, 100000).ok());  // clamped to the 256-token context
  Status empty = warm_up(*model_, *pool_, 0);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "the warm-up needs at least one token");
}

}  // namespace
}  // namespace lm
