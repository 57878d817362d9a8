// Window-bounded K/V end to end: the tiny Mistral (sliding_window 16) generates the 32 greedy
// tokens of transformers (tests/fixtures/models/mistral.json) for prompts longer than its window
// from a K/V pool of 7 blocks of 4 tokens, too small for any of those sequences (up to 56 tokens)
// unless the engine frees the blocks before the window. Block 0, the placeholder left in the
// freed entries, is filled with NaN: attention reading it would spoil the tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "../runtime/collecting_sink.h"
#include "engine/engine.h"
#include "engine/run_to_completion.h"
#include "model/llama_model.h"
#include "runtime/model_executor.h"

namespace lm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const fs::path kFixture = fs::path(LM_REPO_ROOT) / "tests/fixtures/models/mistral.json";
const fs::path kModel = fs::path(LM_BUILD_ROOT) / "test-models/mistral";

struct Case {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> greedy_ids;
};

std::vector<Case> read_cases() {
  std::ifstream in(kFixture);
  const Json fixture = Json::parse(in);
  std::vector<Case> cases;
  for (const Json& c : fixture["cases"])
    cases.push_back(
        {c["prompt_ids"].get<std::vector<int32_t>>(), c["greedy_ids"].get<std::vector<int32_t>>()});
  return cases;
}

// The engine's window as the launcher sets it: the widest, when every layer has one.
int64_t window_of(const ModelConfig& config) {
  const auto& windows = config.layer_sliding_windows;
  if (windows.empty() || std::ranges::any_of(windows, [](int64_t w) { return w <= 0; })) return 0;
  return std::ranges::max(windows);
}

EngineConfig small_pool_config(const LlamaModel& model, int64_t prefill_chunk) {
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 8;  // 7 usable: 28 token slots
  config.max_batch_total_tokens = 28;
  config.max_batch_prefill_tokens = prefill_chunk;
  config.eos_token_ids = model.config().eos_token_ids;
  config.kv_window_tokens = window_of(model.config());
  return config;
}

// Every layer's block 0 (K and V) filled with NaN.
void poison_block_zero(KvPool& kv) {
  const int64_t floats_per_block = kv.view().k[0].numel() / kv.num_blocks();
  for (auto* tensors : {&kv.view().k, &kv.view().v})
    for (const Tensor& t : *tensors)
      std::fill_n(t.as<float>(), floats_per_block, std::numeric_limits<float>::quiet_NaN());
}

std::vector<int32_t> ids_of(const std::vector<SampleResult>& tokens) {
  std::vector<int32_t> ids;
  for (const SampleResult& t : tokens) ids.push_back(t.id);
  return ids;
}

EngineRequest greedy_request(const Case& c) {
  EngineRequest request;
  request.prompt_ids = c.prompt_ids;
  request.max_new_tokens = static_cast<int64_t>(c.greedy_ids.size());
  request.ignore_eos = true;
  request.use_prefix_cache = false;
  return request;
}

class WindowKvModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = LlamaModel::load(kModel.string());
    ASSERT_TRUE(loaded.ok()) << loaded.error().message << " (run `make fixtures-test`)";
    model_ = std::move(loaded).value().release();
    pool_ = new ThreadPool(2);
  }
  static void TearDownTestSuite() {
    delete model_;
    delete pool_;
  }
  static LlamaModel* model_;
  static ThreadPool* pool_;
};

LlamaModel* WindowKvModel::model_ = nullptr;
ThreadPool* WindowKvModel::pool_ = nullptr;

TEST_F(WindowKvModel, LongSequencesMatchTransformersFromAPoolTooSmallForThem) {
  ASSERT_EQ(window_of(model_->config()), 16);
  int num_long = 0;
  for (const Case& c : read_cases()) {
    const auto length = static_cast<int64_t>(c.prompt_ids.size() + c.greedy_ids.size());
    if (static_cast<int64_t>(c.prompt_ids.size()) <= 16) continue;
    ++num_long;
    // Whole prompts, and chunks of 5 (each chunk's first rows read through the placeholders).
    for (int64_t chunk : {int64_t{4096}, int64_t{5}}) {
      SCOPED_TRACE("prompt of " + std::to_string(c.prompt_ids.size()) + " tokens, chunks of " +
                   std::to_string(chunk));
      const EngineConfig config = small_pool_config(*model_, chunk);
      ASSERT_GT(length, (config.num_blocks - 1) * config.block_size);  // needs the freeing
      EngineConfig unwindowed = config;
      unwindowed.kv_window_tokens = 0;
      EXPECT_FALSE(check_fits_empty_batch(unwindowed, greedy_request(c)).ok());

      auto executor = std::make_unique<ModelExecutor>(*model_, *pool_, config);
      poison_block_zero(executor->kv_pool());
      Engine engine(config, std::move(executor));
      auto result = run_to_completion(engine, greedy_request(c));
      ASSERT_TRUE(result.ok()) << result.error().message;
      EXPECT_EQ(ids_of(result->tokens), c.greedy_ids);
      engine.drain();
      EXPECT_EQ(engine.stats().num_blocks_used, 0);
    }
  }
  EXPECT_EQ(num_long, 3);
}

TEST_F(WindowKvModel, BatchOfLongAndShortSequencesMatchesTransformers) {
  // All eight cases at once, prompts of 1 to 24 tokens, in a pool of 15 blocks (60 slots) with
  // prompts chunked by 8: short sequences hold all their blocks, long ones their window's, and
  // the newest are preempted and recomputed when blocks run out.
  const std::vector<Case> cases = read_cases();
  EngineConfig config = small_pool_config(*model_, 8);
  config.num_blocks = 16;
  config.max_batch_total_tokens = 60;
  auto executor = std::make_unique<ModelExecutor>(*model_, *pool_, config);
  poison_block_zero(executor->kv_pool());
  Engine engine(config, std::move(executor));
  std::vector<std::shared_ptr<testing_helpers::CollectingSink>> sinks;
  for (const Case& c : cases) {
    sinks.push_back(std::make_shared<testing_helpers::CollectingSink>());
    ASSERT_TRUE(engine.submit(greedy_request(c), sinks.back()).ok());
  }
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(ids_of(sinks[i]->wait().tokens), cases[i].greedy_ids)
        << "prompt of " << cases[i].prompt_ids.size() << " tokens";
  engine.drain();
  EXPECT_EQ(engine.stats().num_blocks_used, 0);
  EXPECT_GT(engine.stats().num_preemptions, 0);
}

}  // namespace
}  // namespace lm
