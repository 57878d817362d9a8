// The in-process benchmark on a tiny test checkpoint: every recorded run has positive timings
// consistent with its token counts, warm-ups are not recorded, and impossible cases are refused;
// the paired roofline takes a fraction per decode step and leaves its read passes out of decode's
// time; a decode step's bytes leave out an untied embedding table.
#include "bench/engine_benchmark.h"
#include "bench/machine_limits.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "model/weight_dtype.h"

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

TEST(EngineBenchmark, PairedRooflineHasAFractionPerDecodeStepAndLeavesItsPassesOut) {
  auto model = LlamaModel::load(kModel);
  ASSERT_TRUE(model.ok()) << model.error().message;
  ThreadPool pool(2);
  // A pass far slower than the tiny model's step, so that counting it as decode would show.
  ReadProbe probe(pool, int64_t{32} << 20);
  BenchmarkCase c{3, 7, 5};
  c.read_probe = &probe;
  c.decode_read_bytes = decode_read_bytes((*model)->weights());
  const auto start = std::chrono::steady_clock::now();
  auto runs = run_engine_benchmark(**model, pool, c, /*runs=*/1, /*warmups=*/0);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  const BenchmarkRun& r = (*runs)[0];
  // One prefill step (no fraction), then 4 steps that only decode: the last one's pass runs
  // after its token, the 3 before it between decode's tokens.
  ASSERT_EQ(r.decode_roofline_fractions.size(), 4u);
  for (double f : r.decode_roofline_fractions) EXPECT_TRUE(std::isfinite(f) && f > 0) << f;
  ASSERT_EQ(r.read_pass_bytes_per_second.size(), 4u);
  for (double b : r.read_pass_bytes_per_second) EXPECT_GT(b, 0);
  EXPECT_GT(r.read_probe_seconds, 0);
  EXPECT_GT(r.decode_seconds, 0);
  // Left out (PairedRoofline's own test pins which passes): the phases and the passes between
  // them add up to no more than the wall time.
  EXPECT_LE(r.prefill_seconds + r.decode_seconds + r.read_probe_seconds, wall);
  EXPECT_NEAR(r.decode_tokens_per_second * r.decode_seconds, 3 * 4, 1e-6);
}

TEST(EngineBenchmark, NoReadProbeNoFractions) {
  auto model = LlamaModel::load(kModel);
  ASSERT_TRUE(model.ok());
  ThreadPool pool(1);
  auto runs = run_engine_benchmark(**model, pool, {1, 4, 3}, 1, 0);
  ASSERT_TRUE(runs.ok()) << runs.error().message;
  EXPECT_TRUE((*runs)[0].decode_roofline_fractions.empty());
  EXPECT_TRUE((*runs)[0].read_pass_bytes_per_second.empty());
  EXPECT_EQ((*runs)[0].read_probe_seconds, 0);
}

TEST(EngineBenchmark, DecodeReadsAnUntiedEmbeddingOneRowAToken) {
  auto untied = LlamaModel::load(kModel);
  ASSERT_TRUE(untied.ok());
  const LlamaWeights& w = (*untied)->weights();
  ASSERT_NE(w.lm_head.data, w.embed_tokens.data);
  EXPECT_EQ(decode_read_bytes(w),
            summarize_weights(w).bytes - w.embed_tokens.dim(0) * w.embed_tokens.row_bytes());
  auto tied = LlamaModel::load(LM_BUILD_ROOT "/test-models/llama_gqa_tied_sharded");
  ASSERT_TRUE(tied.ok()) << tied.error().message;
  const LlamaWeights& t = (*tied)->weights();
  ASSERT_EQ(t.lm_head.data, t.embed_tokens.data);
  EXPECT_EQ(decode_read_bytes(t), summarize_weights(t).bytes);  // the table is the head
}

TEST(EngineBenchmark, DecodeReadsATiedHeadsCopyInPlaceOfTheTable) {
  // The default model's tied Q4_1 head is interleaved for the int8 GEMM at AVX2 and up: a copy,
  // which a step reads whole, beside the table it reads a row of.
  auto model = LlamaModel::load(LM_REPO_ROOT "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_TRUE(model.ok()) << model.error().message;
  const LlamaWeights& w = (*model)->weights();
  const int64_t table = w.embed_tokens.dim(0) * w.embed_tokens.row_bytes();
  ASSERT_EQ(w.lm_head.data, w.embed_tokens.data);
  const int64_t tied = decode_read_bytes(w);
  EXPECT_EQ(tied, summarize_weights(w).bytes);
  (*model)->set_int8_activations(true);
  if (w.lm_head.data == w.embed_tokens.data) GTEST_SKIP() << "no interleaved copy at this level";
  EXPECT_EQ(decode_read_bytes(w), summarize_weights(w).bytes - table);
  EXPECT_EQ(summarize_weights(w).bytes - table, tied);  // the copy has the table's bytes
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
