// forward_batch over one mixed flat batch (two prefills of different lengths, decodes and a chunk
// after existing K/V, scattered blocks of a shared pool) gives the logits each sequence gets run
// alone over a pool of its own, for every tiny checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../common/sequence_forward.h"
#include "model/llama_model.h"
#include "runtime/kv_pool.h"

namespace lm {
namespace {

namespace fs = std::filesystem;

const fs::path kTestModels = fs::path(LM_BUILD_ROOT) / "test-models";
constexpr int64_t kBlockSize = 4;

std::vector<std::string> tiny_checkpoints() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kTestModels)) {
    const std::string name = entry.path().filename().string();
    if (fs::exists(entry.path() / "config.json") && name.find("smollm2") == std::string::npos)
      names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// One sequence of the test: `context` tokens already computed, then `tokens` new ones this step.
struct TestSequence {
  std::vector<int32_t> ids;  // all its tokens
  int64_t context = 0;
  std::vector<int32_t> block_table;
};

// Flat inputs for the sequences' tokens [begin(s), end(s)), every row's logits requested.
struct FlatBatch {
  std::vector<int32_t> token_ids, positions, query_begins{0}, block_tables, logit_rows;
  std::vector<int64_t> slot_mapping;
  int64_t max_blocks = 0;

  BatchInput view() const {
    return BatchInput{.token_ids = token_ids,
                      .positions = positions,
                      .slot_mapping = slot_mapping,
                      .query_begins = query_begins,
                      .block_tables = block_tables,
                      .max_blocks_per_seq = max_blocks,
                      .logit_rows = logit_rows,
                      .rope_lengths = {}};
  }
};

FlatBatch flat_batch(const std::vector<TestSequence>& seqs, bool context_only,
                     int64_t block_size = kBlockSize) {
  FlatBatch b;
  for (const TestSequence& s : seqs)
    b.max_blocks = std::max(b.max_blocks, static_cast<int64_t>(s.block_table.size()));
  for (const TestSequence& s : seqs) {
    const int64_t begin = context_only ? 0 : s.context;
    const int64_t end = context_only ? s.context : static_cast<int64_t>(s.ids.size());
    if (begin == end) continue;
    for (int64_t p = begin; p < end; ++p) {
      b.logit_rows.push_back(static_cast<int32_t>(b.token_ids.size()));
      b.token_ids.push_back(s.ids[static_cast<size_t>(p)]);
      b.positions.push_back(static_cast<int32_t>(p));
      b.slot_mapping.push_back(s.block_table[static_cast<size_t>(p / block_size)] * block_size +
                               p % block_size);
    }
    b.query_begins.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.block_tables.insert(b.block_tables.end(), s.block_table.begin(), s.block_table.end());
    b.block_tables.resize(static_cast<size_t>(b.max_blocks) * (b.query_begins.size() - 1), 0);
  }
  return b;
}

// Logits of rows [first, end) of `seq` run alone (its earlier tokens in a step before).
std::vector<float> alone(LlamaModel& model, const TestSequence& seq, int64_t first, int64_t end,
                         ThreadPool& pool, DType kv_dtype = DType::kF32) {
  SequenceForward sequence(model, static_cast<int64_t>(seq.ids.size()), kv_dtype);
  const std::span<const int32_t> ids(seq.ids);
  if (first > 0) sequence.run(ids.first(static_cast<size_t>(first)), false, pool);
  return sequence.run(ids.subspan(static_cast<size_t>(first), static_cast<size_t>(end - first)),
                      /*all_logits=*/true, pool);
}

void expect_close(std::span<const float> got, std::span<const float> want) {
  ASSERT_EQ(got.size(), want.size());
  float scale = 0.0f;
  for (float w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5f * scale + 1e-6f) << "element " << i;
}

// Exactly the same bits.
void expect_equal(std::span<const float> got, std::span<const float> want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
}

// One mixed step against each sequence alone, compared with expect_close or, where the model
// promises batch invariance, expect_equal; both K/V pools in kv_dtype.
void check_mixed_batch(LlamaModel& model, bool same_bits, DType kv_dtype = DType::kF32) {
  ThreadPool pool(2);
  const int32_t vocab = static_cast<int32_t>(model.config().vocab_size);

  // Two prefills (13 and 5 tokens), decodes after 20 and 37 positions, a 4-token chunk after 9.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {0, 13}, {20, 1}, {0, 5}, {37, 1}, {9, 4}};
  std::mt19937 rng(7);
  std::vector<TestSequence> seqs;
  int64_t num_blocks = 1;  // block 0 reserved
  for (const auto& [context, num_new] : shapes) {
    TestSequence s;
    s.context = context;
    for (int64_t i = 0; i < context + num_new; ++i)
      s.ids.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab)));
    num_blocks += (context + num_new + kBlockSize - 1) / kBlockSize;
    seqs.push_back(std::move(s));
  }
  num_blocks += 3;  // spare blocks nobody owns
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks - 1));
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), rng);
  size_t next = 0;
  for (TestSequence& s : seqs) {
    const auto n = (static_cast<int64_t>(s.ids.size()) + kBlockSize - 1) / kBlockSize;
    for (int64_t i = 0; i < n; ++i) s.block_table.push_back(ids[next++]);
  }

  KvPool kv(model.config(), num_blocks, kBlockSize, kv_dtype);
  std::vector<float> logits;
  // Step 1: the existing context of the sequences that have one, batched as well.
  const FlatBatch context = flat_batch(seqs, /*context_only=*/true);
  model.forward_batch(context.view(), kv.view(), logits, pool);
  // Step 2: the mixed step.
  const FlatBatch step = flat_batch(seqs, /*context_only=*/false);
  model.forward_batch(step.view(), kv.view(), logits, pool);

  const auto v = static_cast<size_t>(vocab);
  size_t row = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    SCOPED_TRACE("sequence " + std::to_string(s));
    const auto end = static_cast<int64_t>(seqs[s].ids.size());
    const std::vector<float> want = alone(model, seqs[s], seqs[s].context, end, pool, kv_dtype);
    const size_t rows = static_cast<size_t>(end - seqs[s].context);
    const std::span<const float> got = std::span<const float>(logits).subspan(row * v, rows * v);
    if (same_bits) {
      expect_equal(got, want);
    } else {
      expect_close(got, want);
    }
    row += rows;
  }
}

class BatchedForward : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchedForward, MixedBatchMatchesEachSequenceAlone) {
  auto loaded = LlamaModel::load((kTestModels / GetParam()).string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message << " (run `make fixtures-test`)";
  check_mixed_batch(**loaded, /*same_bits=*/false);
}

// docs/architecture.md, Numerics: with int8 activations on GGML block formats a sequence's logits
// are the same bits alone or in any batch, at whatever kernel level runs (ctest runs this once per
// level, CPU_ISA): the default Q4_1 model as served.
TEST(BatchedForwardInt8, MixedBatchGivesTheBitsOfEachSequenceAlone) {
  auto loaded =
      LlamaModel::load(std::string(LM_REPO_ROOT) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  (*loaded)->set_int8_activations(true);
  check_mixed_batch(**loaded, /*same_bits=*/true);
}

// --kv-cache-dtype: a cache in fp16 (the default for this model), bf16 or FP8 keeps batch
// invariance (rows are written once and read back as the same fp32 values whatever shares the
// step).
TEST(BatchedForwardInt8, EveryKvCacheDtypeGivesTheBitsOfEachSequenceAlone) {
  auto loaded =
      LlamaModel::load(std::string(LM_REPO_ROOT) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  (*loaded)->set_int8_activations(true);
  for (DType dtype : {DType::kF16, DType::kBF16, DType::kF8_E4M3, DType::kF8_E5M2}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    check_mixed_batch(**loaded, /*same_bits=*/true, dtype);
  }
}

// How far each cache dtype moves the logits from the fp32 cache's, with fp32 activations (with
// int8 activations a rounding flip of one activation block moves logits by ~1 whatever the cache,
// hiding the cache's own effect). Measured on this 40-token sequence: fp16
// 0.018, bf16 0.13, fp8_e4m3fn 1.9, fp8_e5m2 3.7 -- the formats' 11, 8, 4 and 3 significant bits;
// the bounds leave about 2x room.
TEST(BatchedForward, KvCacheDtypesMoveLogitsByTheirRounding) {
  auto loaded =
      LlamaModel::load(std::string(LM_REPO_ROOT) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  LlamaModel& model = **loaded;
  model.set_int8_activations(false);
  ThreadPool pool(2);
  TestSequence seq;
  for (int32_t i = 0; i < 40; ++i) seq.ids.push_back((i * 97 + 13) % 2000);
  const std::vector<float> fp32 = alone(model, seq, 0, 40, pool);
  float previous = 0.0f;
  for (auto [dtype, bound] : {std::pair{DType::kF16, 0.04f}, std::pair{DType::kBF16, 0.3f},
                              std::pair{DType::kF8_E4M3, 4.0f}, std::pair{DType::kF8_E5M2, 8.0f}}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const std::vector<float> got = alone(model, seq, 0, 40, pool, dtype);
    ASSERT_EQ(got.size(), fp32.size());
    float worst = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - fp32[i]));
    std::printf("%s cache: max |logit - fp32 cache's| over 40 positions = %.4f\n",
                std::string(dtype_name(dtype)).c_str(), worst);
    EXPECT_GT(worst, previous);  // fewer significant bits, further off
    EXPECT_LT(worst, bound);
    previous = worst;
  }
}

// The same for a MoE model: a token's experts run over whichever tokens chose them in the step,
// and its result must not depend on them (kernels/cpu row-independent GEMMs, per-token sums in
// expert order). Quantized expert stacks (scripts/fixtures/make_kquant_checkpoint.py).
TEST(BatchedForwardInt8, MoeMixedBatchGivesTheBitsOfEachSequenceAlone) {
  auto loaded = LlamaModel::load((kTestModels / "kquant-gguf" / "model-moe.gguf").string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message << " (run `make fixtures-test`)";
  (*loaded)->set_int8_activations(true);
  check_mixed_batch(**loaded, /*same_bits=*/true);
}

// 16-bit checkpoints (HF folders, F16 and BF16) with int8 activations on: their Linears are
// copied into F16/BF16 panels (fp32 activations, one FMA chain per output), so a sequence's
// logits are the same bits alone or in any batch too, at every kernel level.
class BatchedForwardPanels16 : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchedForwardPanels16, MixedBatchGivesTheBitsOfEachSequenceAlone) {
  auto loaded = LlamaModel::load((kTestModels / GetParam()).string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message << " (run `make fixtures-test`)";
  (*loaded)->set_int8_activations(true);
  EXPECT_GT((*loaded)->num_panelled_weights(), 0);
  check_mixed_batch(**loaded, /*same_bits=*/true);
}

// --dtype's converted matrices are put in panels where they lie.
TEST_P(BatchedForwardPanels16, AfterDtypeConversionToo) {
  auto loaded = LlamaModel::load((kTestModels / GetParam()).string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  ThreadPool pool(2);
  (*loaded)->convert_float_weights(DType::kF16, pool);
  (*loaded)->set_int8_activations(true);
  EXPECT_GT((*loaded)->num_panelled_weights(), 0);
  check_mixed_batch(**loaded, /*same_bits=*/true);
}

INSTANTIATE_TEST_SUITE_P(HalfCheckpoints, BatchedForwardPanels16,
                         ::testing::Values("llama_rope_linear", "qwen3", "phi3", "gemma3"),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(BatchedForward, LogitsOnlyForTheRequestedRows) {
  auto loaded = LlamaModel::load((kTestModels / GetParam()).string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  LlamaModel& model = **loaded;
  ThreadPool pool(2);
  TestSequence a{{1, 2, 3, 4, 5, 6}, 0, {3, 1}};
  TestSequence b{{7, 8, 9}, 0, {2}};
  FlatBatch batch = flat_batch({a, b}, false);
  std::vector<float> all;
  KvPool kv(model.config(), 4, kBlockSize);
  model.forward_batch(batch.view(), kv.view(), all, pool);
  batch.logit_rows = {8, 5};  // b's last row, then a's
  std::vector<float> some;
  model.forward_batch(batch.view(), kv.view(), some, pool);
  const auto v = static_cast<size_t>(model.config().vocab_size);
  ASSERT_EQ(some.size(), 2 * v);
  expect_close(std::span<const float>(some).first(v),
               std::span<const float>(all).subspan(8 * v, v));
  expect_close(std::span<const float>(some).subspan(v),
               std::span<const float>(all).subspan(5 * v, v));
  batch.logit_rows.clear();
  model.forward_batch(batch.view(), kv.view(), some, pool);
  EXPECT_TRUE(some.empty());
}

// Decode tokens/s on the default model at several batch sizes: one forward_batch per step over
// a shared pool versus one forward per sequence over its own pool (the pre-pool executor).
// Run with --gtest_also_run_disabled_tests --gtest_filter='*DecodeThroughput*'.
TEST(BatchedForwardBenchmark, DISABLED_DecodeThroughput) {
  auto loaded =
      LlamaModel::load(std::string(LM_REPO_ROOT) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  LlamaModel& model = **loaded;
  ThreadPool pool(0);
  constexpr int64_t kPrompt = 16, kSteps = 8, kBlock = 16;
  const auto seconds_since = [](auto start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (int64_t batch : {1, 4, 16, 64}) {
    const int64_t blocks_per_seq = (kPrompt + kSteps + kBlock - 1) / kBlock;
    std::vector<TestSequence> seqs(static_cast<size_t>(batch));
    for (int64_t s = 0; s < batch; ++s) {
      TestSequence& seq = seqs[static_cast<size_t>(s)];
      for (int64_t i = 0; i < kPrompt + kSteps; ++i)
        seq.ids.push_back(static_cast<int32_t>((s * 131 + i * 17 + 1) % 1000));
      seq.context = kPrompt;
      for (int64_t b = 0; b < blocks_per_seq; ++b)
        seq.block_table.push_back(static_cast<int32_t>(1 + s * blocks_per_seq + b));
    }
    KvPool kv(model.config(), 1 + batch * blocks_per_seq, kBlock);
    std::vector<float> logits;
    model.forward_batch(flat_batch(seqs, /*context_only=*/true, kBlock).view(), kv.view(), logits,
                        pool);
    const auto batched_start = std::chrono::steady_clock::now();
    for (int64_t step = 0; step < kSteps; ++step) {
      for (TestSequence& seq : seqs) seq.ids.resize(static_cast<size_t>(seq.context + 1));
      model.forward_batch(flat_batch(seqs, /*context_only=*/false, kBlock).view(), kv.view(),
                          logits, pool);
      for (TestSequence& seq : seqs) {
        ++seq.context;
        seq.ids.resize(static_cast<size_t>(kPrompt + kSteps), 7);
      }
    }
    const double batched = static_cast<double>(batch * kSteps) / seconds_since(batched_start);

    const int64_t loop_steps = batch >= 64 ? 2 : kSteps;
    std::vector<std::unique_ptr<SequenceForward>> lone;
    for (TestSequence& seq : seqs) {
      lone.push_back(std::make_unique<SequenceForward>(model, kPrompt + kSteps));
      lone.back()->run(std::span<const int32_t>(seq.ids).first(kPrompt), false, pool);
    }
    const auto loop_start = std::chrono::steady_clock::now();
    for (int64_t step = 0; step < loop_steps; ++step) {
      for (size_t s = 0; s < seqs.size(); ++s) {
        lone[s]->run(
            std::span<const int32_t>(seqs[s].ids).subspan(static_cast<size_t>(kPrompt + step), 1),
            false, pool);
      }
    }
    const double loop = static_cast<double>(batch * loop_steps) / seconds_since(loop_start);
    std::printf("batch %3lld: forward_batch %8.1f tok/s   per-sequence loop %8.1f tok/s  (x%.2f)\n",
                static_cast<long long>(batch), batched, loop, batched / loop);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, BatchedForward, ::testing::ValuesIn(tiny_checkpoints()),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace lm
