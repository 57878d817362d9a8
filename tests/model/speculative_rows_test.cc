// What speculative decoding's exactness rests on: a sequence's rows computed together as one
// chunk (its newest token and the proposals after it) give the logits those tokens get decoded
// one step at a time. The same bits where the weights' kernels are batch-invariant (int8
// activations over quantized weights, 16-bit panels), with a sliding window too; over fp32 rows
// only close, since a one-row matmul takes the dot path, which sums in another order than the
// several-row GEMM (the same holds for plain decoding alone versus in a batch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "../common/sequence_forward.h"

namespace lm {
namespace {

namespace fs = std::filesystem;

const fs::path kTestModels = fs::path(LM_BUILD_ROOT) / "test-models";

// Logits of positions [context, context + num_rows) of `ids`, computed as one chunk after the
// context (chunk = true) or one token a step.
std::vector<float> logits_of(LlamaModel& model, const std::vector<int32_t>& ids, int64_t context,
                             int64_t num_rows, bool chunk, ThreadPool& pool) {
  SequenceForward sequence(model, static_cast<int64_t>(ids.size()));
  const std::span<const int32_t> all(ids);
  sequence.run(all.first(static_cast<size_t>(context)), false, pool);
  if (chunk) {
    return sequence.run(all.subspan(static_cast<size_t>(context), static_cast<size_t>(num_rows)),
                        /*all_logits=*/true, pool);
  }
  std::vector<float> out;
  for (int64_t p = context; p < context + num_rows; ++p) {
    const std::vector<float> row = sequence.run(all.subspan(static_cast<size_t>(p), 1), true, pool);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// A 5-row chunk after each context length against the same tokens decoded one by one.
void check_chunk_rows(LlamaModel& model, bool same_bits, std::vector<int64_t> contexts = {37, 3}) {
  ThreadPool pool(2);
  std::mt19937 rng(11);
  std::vector<int32_t> ids(static_cast<size_t>(std::ranges::max(contexts) + 5));
  for (int32_t& id : ids)
    id = static_cast<int32_t>(rng() % static_cast<uint32_t>(model.config().vocab_size));
  for (const int64_t context : contexts) {
    SCOPED_TRACE("context " + std::to_string(context));
    const std::vector<float> chunk = logits_of(model, ids, context, 5, /*chunk=*/true, pool);
    const std::vector<float> decoded = logits_of(model, ids, context, 5, /*chunk=*/false, pool);
    ASSERT_EQ(chunk.size(), decoded.size());
    float scale = 0.0f;
    for (float x : decoded) scale = std::max(scale, std::abs(x));
    for (size_t i = 0; i < chunk.size(); ++i) {
      if (same_bits) {
        ASSERT_EQ(chunk[i], decoded[i]) << "element " << i;
      } else {
        ASSERT_NEAR(chunk[i], decoded[i], 1e-5f * scale + 1e-6f) << "element " << i;
      }
    }
  }
}

TEST(SpeculativeRows, DefaultModelWithInt8ActivationsGivesTheSameBits) {
  auto loaded =
      LlamaModel::load(std::string(LM_REPO_ROOT) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  (*loaded)->set_int8_activations(true);
  // After 300 positions a lone decode row's attention is split over the threads by positions
  // (its 3 KV heads leave a thread idle otherwise); a chunk's rows are not: the same bits still.
  check_chunk_rows(**loaded, /*same_bits=*/true, {300, 37, 3});
}

TEST(SpeculativeRows, KQuantModelWithInt8ActivationsGivesTheSameBits) {
  auto loaded = LlamaModel::load((kTestModels / "kquant-gguf" / "model-kquants.gguf").string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message << " (run `make fixtures-test`)";
  (*loaded)->set_int8_activations(true);
  check_chunk_rows(**loaded, /*same_bits=*/true);
}

// 16-bit panels, after --dtype float16; the sliding-window model's window (12) is shorter than
// the context, so its chunk rows read windows of the paged cache.
TEST(SpeculativeRows, HalfPanelsGiveTheSameBitsWithAndWithoutAWindow) {
  for (const char* name : {"llama_mha_untied", "qwen2_sliding"}) {
    SCOPED_TRACE(name);
    auto loaded = LlamaModel::load((kTestModels / name).string());
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    ThreadPool pool(2);
    (*loaded)->convert_float_weights(DType::kF16, pool);
    (*loaded)->set_int8_activations(true);
    EXPECT_GT((*loaded)->num_panelled_weights(), 0);
    check_chunk_rows(**loaded, /*same_bits=*/true);
  }
}

TEST(SpeculativeRows, Fp32RowsAreOnlyClose) {
  auto loaded = LlamaModel::load((kTestModels / "llama_mha_untied").string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  (*loaded)->set_int8_activations(false);
  check_chunk_rows(**loaded, /*same_bits=*/false);
}

}  // namespace
}  // namespace lm
