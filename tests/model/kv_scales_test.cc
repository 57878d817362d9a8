// A checkpoint's FP8 KV cache scales (compressed-tensors' kv_cache_scheme, TGI's k_scale /
// v_scale per attention layer; scripts/fixtures/make_kv_scale_checkpoint.py): read at load; an
// FP8 cache holds K / k_scale and V / v_scale and computes what transformers computes when every
// K and V it attends to goes through float8_e4m3fn with those scales; other caches ignore them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "../common/sequence_forward.h"
#include "model/llama_model.h"

namespace lm {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

const fs::path kFixture = fs::path(LM_REPO_ROOT) / "tests/fixtures/kv_scales/kv_scales_fp8";

Json reference() {
  std::ifstream in(kFixture.string() + ".json");
  return Json::parse(in);
}

size_t argmax(const std::vector<float>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The largest |logit - reference| over the fixture's prompts (last prompt position), relative to
// the largest reference logit, and the greedy tokens after each prompt with a cache in kv_dtype.
struct CacheRun {
  double max_rel = 0;
  std::vector<std::vector<int32_t>> greedy;
};

CacheRun run_cases(LlamaModel& model, const Json& ref, DType kv_dtype, ThreadPool& pool) {
  CacheRun out;
  for (const Json& c : ref["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = c["logits"].get<std::vector<float>>();
    const auto num_new = static_cast<int64_t>(c["greedy_ids"].size());
    SequenceForward seq(model, static_cast<int64_t>(prompt.size()) + num_new, kv_dtype);
    std::vector<float> logits = seq.run(prompt, /*all_logits=*/false, pool);
    EXPECT_EQ(logits.size(), want.size());
    float scale = 1;
    for (float w : want) scale = std::max(scale, std::abs(w));
    for (size_t i = 0; i < want.size() && i < logits.size(); ++i)
      out.max_rel = std::max(out.max_rel, std::abs(logits[i] - want[i]) / double{scale});
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < num_new; ++t) {
      ids.push_back(static_cast<int32_t>(argmax(logits)));
      if (t + 1 < num_new) logits = seq.run(std::span(&ids.back(), 1), false, pool);
    }
    out.greedy.push_back(std::move(ids));
  }
  return out;
}

TEST(KvScales, AreReadPerLayer) {
  auto model = LlamaModel::load(kFixture.string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const Json ref = reference();
  const auto& layers = (*model)->weights().layers;
  ASSERT_EQ(layers.size(), ref["scales"].size());
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto scales = ref["scales"][std::to_string(i)].get<std::vector<float>>();
    EXPECT_TRUE(layers[i].has_kv_scales);
    EXPECT_EQ(layers[i].k_scale, scales[0]);
    EXPECT_EQ(layers[i].v_scale, scales[1]);
  }
}

// The checkpoint's weights are float (only the cache is quantized): --quantize quantizes them at
// load as it does any float checkpoint's, and the scales stay.
TEST(KvScales, AKvOnlyCheckpointsFloatWeightsAreQuantizedAtLoad) {
  auto model = LlamaModel::load(kFixture.string(), {.rope_scaling = {}, .quantize = "q8_0"});
  ASSERT_TRUE(model.ok()) << model.error().message;
  ThreadPool pool(2);
  EXPECT_GT((*model)->quantize_float_weights(DType::kQ8_0, pool), 0);
  EXPECT_EQ((*model)->weights().layers[0].q_proj.dtype, DType::kQ8_0);
  EXPECT_TRUE((*model)->weights().layers[0].has_kv_scales);
}

TEST(KvScales, AnFp8CacheComputesWhatTransformersComputesThroughTheScaledCache) {
  auto model = LlamaModel::load(kFixture.string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  (*model)->set_int8_activations(false);
  ThreadPool pool(2);
  const Json ref = reference();
  const CacheRun fp8 = run_cases(**model, ref, DType::kF8_E4M3, pool);
  // An fp16 cache does not use the scales: it is close to fp32 attention, so it misses the FP8
  // rounding the reference applies -- the distance a cache that ignored the scales would show.
  const CacheRun fp16 = run_cases(**model, ref, DType::kF16, pool);
  std::printf("max relative logit diff vs the reference: fp8_e4m3fn cache %.3g, fp16 cache %.3g\n",
              fp8.max_rel, fp16.max_rel);
  size_t i = 0;
  for (const Json& c : ref["cases"])
    EXPECT_EQ(fp8.greedy[i++], c["greedy_ids"].get<std::vector<int32_t>>());
  EXPECT_LT(fp8.max_rel, 1e-4);
  EXPECT_GT(fp16.max_rel, 10 * fp8.max_rel);
}

// The fixture with layer 0's k_scale replaced by `value`, in a folder of its own.
fs::path with_k_scale(float value, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kv_scales_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kFixture / "config.json", dir / "config.json");
  std::ifstream in(kFixture / "model.safetensors", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const Json header = Json::parse(bytes.substr(8, header_len));
  const auto begin = header["model.layers.0.self_attn.k_scale"]["data_offsets"][0].get<size_t>();
  std::memcpy(bytes.data() + 8 + header_len + begin, &value, sizeof(value));
  std::ofstream(dir / "model.safetensors", std::ios::binary) << bytes;
  return dir;
}

TEST(KvScales, ANonPositiveOrNonFiniteScaleIsAnErrorNamingTheTensor) {
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    const fs::path dir = with_k_scale(bad, std::to_string(std::signbit(bad)) + std::to_string(bad));
    auto model = LlamaModel::load(dir.string());
    ASSERT_FALSE(model.ok()) << bad;
    EXPECT_NE(model.error().message.find("'model.layers.0.self_attn.k_scale'"), std::string::npos)
        << model.error().message;
    EXPECT_NE(model.error().message.find("must be positive and finite"), std::string::npos);
    fs::remove_all(dir);
  }
  const fs::path dir = with_k_scale(0.5f, "ok");
  auto model = LlamaModel::load(dir.string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ((*model)->weights().layers[0].k_scale, 0.5f);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lm
