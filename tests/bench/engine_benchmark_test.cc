// The in-process benchmark on a tiny test checkpoint: every recorded run has positive timings
// consistent with its token counts, warm-ups are not recorded, and impossible cases are refused.
#include "bench/engine_benchmark.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

constexpr const char* kModel = LM_BUILD_ROOT "/test-models/llama_mha_untied";

TEST(EngineBenchmark, RunsAreTimedAndConsistent) {
  auto model = LlamaModel::load(kModel);
  ASSERT_TRUE(model.ok()) << model.error().message;
  ThreadPool pool(2);
  const BenchmarkCase c{3, 7, 5};
  auto runs = run_engine_benchmark(**model, pool, c, /*runs=*/2, /*warmups=*/1);
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  ASSERT_EQ(runs->size(), 2u);
  for (const BenchmarkRun& r : *runs) {
    EXPECT_GT(r.prefill_seconds, 0);
    EXPECT_GT(r.decode_seconds, 0);
    EXPECT_NEAR(r.prefill_tokens_per_second * r.prefill_seconds, 3 * 7, 1e-6);
    EXPECT_NEAR(r.decode_tokens_per_second * r.decode_seconds, 3 * 4, 1e-6);
    EXPECT_NEAR(r.decode_step_seconds * 4, r.decode_seconds, 1e-9);
  }
}

TEST(EngineBenchmark, SingleTokenDecodeHasNoDecodePhase) {
  auto model = LlamaModel::load(kModel);
  ASSERT_TRUE(model.ok());
  ThreadPool pool(1);
  auto runs = run_engine_benchmark(**model, pool, {1, 4, 1}, 1, 0);
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  EXPECT_EQ((*runs)[0].decode_tokens_per_second, 0);
}

TEST(EngineBenchmark, RefusesCasesBeyondTheContext) {
  auto model = LlamaModel::load(kModel);
  ASSERT_TRUE(model.ok());
  ThreadPool pool(1);
  auto runs = run_engine_benchmark(**model, pool, {1, (*model)->config().max_context(), 8}, 1, 0);
  ASSERT_FALSE(runs.ok());
  EXPECT_NE(runs.error().message.find("exceeds the model's context"), std::string::npos);
  EXPECT_FALSE(run_engine_benchmark(**model, pool, {0, 4, 4}, 1, 0).ok());
}

}  // namespace
}  // namespace lm
