// The launcher's load-time changes to a model against transformers' outputs: --dtype float32 on
// an F16 checkpoint (lossless: the fixture's tokens and logits), --dtype float16/bfloat16 on an
// F32 one (weights rounded as torch rounds them), and --rope-scaling/--rope-factor standing in
// for the config's own rope_scaling.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/fp16.h"
#include "engine/engine.h"
#include "engine/run_to_completion.h"
#include "model/llama_model.h"
#include "runtime/model_executor.h"
#include "sequence_forward.h"

namespace lm {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(LM_REPO_ROOT) / "tests/fixtures/models";
const fs::path kTestModels = fs::path(LM_BUILD_ROOT) / "test-models";

Json read_json(const fs::path& p) {
  std::ifstream in(p);
  return Json::parse(in);
}

std::vector<int32_t> greedy(LlamaModel& model, ThreadPool& pool, std::vector<int32_t> prompt,
                            int64_t max_new_tokens) {
  EngineConfig config;
  config.max_batch_total_tokens = static_cast<int64_t>(prompt.size()) + max_new_tokens;
  Engine engine(config, std::make_unique<ModelExecutor>(model, pool, config));
  EngineRequest request;
  request.prompt_ids = std::move(prompt);
  request.max_new_tokens = max_new_tokens;
  request.ignore_eos = true;
  auto result = run_to_completion(engine, std::move(request));
  LM_CHECK(result.ok());
  std::vector<int32_t> ids;
  for (const auto& t : result->tokens) ids.push_back(t.id);
  return ids;
}

// Largest |logit - reference| of the fixture's cases, relative to each case's largest logit;
// and how many cases' greedy tokens equal the fixture's.
struct Agreement {
  double max_rel = 0;
  size_t greedy_equal = 0;
  size_t cases = 0;
};

Agreement agreement(LlamaModel& model, const Json& fixture) {
  ThreadPool pool(2);
  Agreement a;
  for (const Json& c : fixture["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected = c["greedy_ids"].get<std::vector<int32_t>>();
    const auto logit_ids = c["logit_ids"].get<std::vector<int32_t>>();
    const auto ref = c["logits"].get<std::vector<float>>();
    SequenceForward sequence(model, static_cast<int64_t>(prompt.size()));
    const std::vector<float> logits = sequence.run(prompt, /*all_logits=*/false, pool);
    float scale = 1;
    for (float r : ref) scale = std::max(scale, std::abs(r));
    for (size_t i = 0; i < logit_ids.size(); ++i) {
      const double diff = std::abs(logits[static_cast<size_t>(logit_ids[i])] - ref[i]);
      a.max_rel = std::max(a.max_rel, diff / scale);
    }
    a.greedy_equal +=
        greedy(model, pool, prompt, static_cast<int64_t>(expected.size())) == expected;
    ++a.cases;
  }
  return a;
}

TEST(LoadOptions, Float32OnAnF16CheckpointMatchesTransformers) {
  auto model = LlamaModel::load((kTestModels / "llama_rope_linear").string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const WeightsSummary before = summarize_weights((*model)->weights(), DType::kF32);
  EXPECT_EQ(before.stored_dtypes, "F16");
  EXPECT_EQ(before.num_converted, before.num_matrices);
  EXPECT_EQ(before.num_quantized, 0);
  ThreadPool pool(2);
  (*model)->convert_float_weights(DType::kF32, pool);
  EXPECT_EQ((*model)->weights().layers[0].q_proj.dtype, DType::kF32);
  const WeightsSummary after = summarize_weights((*model)->weights());
  EXPECT_EQ(after.stored_dtypes, "F32");
  EXPECT_EQ(after.bytes, before.bytes);  // the summary's plan was what the conversion did
  const Agreement a = agreement(**model, read_json(kFixtures / "llama_rope_linear.json"));
  EXPECT_EQ(a.greedy_equal, a.cases);
  EXPECT_LT(a.max_rel, 1e-4);
}

TEST(LoadOptions, HalfDtypesRoundF32WeightsAsTorchDoes) {
  const std::string path = (kTestModels / "llama_mha_untied").string();
  auto reference = LlamaModel::load(path);
  ASSERT_TRUE(reference.ok()) << reference.error().message;
  const Tensor f32 = (*reference)->weights().layers[1].down_proj;
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    auto model = LlamaModel::load(path);
    ASSERT_TRUE(model.ok());
    const int64_t f32_bytes = summarize_weights((*model)->weights()).bytes;
    ThreadPool pool(3);
    (*model)->convert_float_weights(dtype, pool);
    const Tensor w = (*model)->weights().layers[1].down_proj;
    ASSERT_EQ(w.dtype, dtype);
    ASSERT_EQ(w.shape, f32.shape);
    for (int64_t i = 0; i < f32.numel(); ++i) {
      const float x = f32.as<float>()[i];
      const uint16_t bits = w.as<uint16_t>()[i];
      ASSERT_EQ(bits, dtype == DType::kF16 ? fp32_to_fp16(x) : fp32_to_bf16(x)) << i;
    }
    EXPECT_LT(summarize_weights((*model)->weights()).bytes, f32_bytes * 6 / 10);
    // Rounded weights move the logits a little, not the model.
    const Agreement a = agreement(**model, read_json(kFixtures / "llama_mha_untied.json"));
    EXPECT_GT(a.max_rel, 0.0);
    EXPECT_LT(a.max_rel, dtype == DType::kF16 ? 2e-3 : 2e-2);
  }
}

// A copy of llama_rope_linear whose config.json has no rope_scaling: the flags must restore it.
TEST(LoadOptions, RopeScalingFlagsReplaceTheConfigs) {
  const fs::path source = kTestModels / "llama_rope_linear";
  // Per process: ctest runs this binary once per CPU ISA level, in parallel.
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("rope_override_model_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_symlink(source / "model.safetensors", dir / "model.safetensors");
  Json config = read_json(source / "config.json");
  config["rope_scaling"] = nullptr;
  std::ofstream(dir / "config.json") << config.dump();
  const Json fixture = read_json(kFixtures / "llama_rope_linear.json");

  auto plain = LlamaModel::load(dir.string());
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_LT(agreement(**plain, fixture).greedy_equal, fixture["cases"].size());

  auto overridden =
      LlamaModel::load(dir.string(), {RopeScalingOverride{RopeType::kLinear, 2.0}, {}});
  ASSERT_TRUE(overridden.ok()) << overridden.error().message;
  EXPECT_EQ((*overridden)->config().rope.type, RopeType::kLinear);
  const Agreement a = agreement(**overridden, fixture);
  EXPECT_EQ(a.greedy_equal, a.cases);
  EXPECT_LT(a.max_rel, 1e-4);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lm
