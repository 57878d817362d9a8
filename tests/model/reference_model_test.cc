// The whole model against golden outputs from HF transformers (tests/fixtures/models/*.json,
// made by scripts/fixtures/make_model_references.py): last-prompt-position logits within a
// measured tolerance and 32 greedy tokens identical, for every tiny variant and the default model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/llama_model.h"
#include "runtime/generator.h"
#include "runtime/kv_cache.h"

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

std::vector<std::string> reference_variants() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kFixtures)) {
    const std::string stem = entry.path().stem().string();
    if (entry.path().extension() == ".json" && stem.find("llamacpp") == std::string::npos)
      names.push_back(stem);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Where each variant is loaded from: its HF folder, and the GGUF too when the reference came from
// one.
std::vector<std::string> model_paths(const Json& source) {
  std::vector<std::string> paths;
  if (source.contains("gguf"))
    paths.push_back((fs::path(LM_REPO_ROOT) / source["gguf"].get<std::string>()).string());
  if (source.contains("hf_dir"))
    paths.push_back((kTestModels / source["hf_dir"].get<std::string>()).string());
  return paths;
}

class ReferenceModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceModel, MatchesTransformers) {
  const Json fixture = read_json(kFixtures / (GetParam() + ".json"));
  ThreadPool pool(2);
  for (const std::string& path : model_paths(fixture["source"])) {
    SCOPED_TRACE(path);
    auto model = LlamaModel::load(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    double max_abs = 0, max_rel = 0;
    for (const Json& c : fixture["cases"]) {
      const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      const auto expected_greedy = c["greedy_ids"].get<std::vector<int32_t>>();
      const auto logit_ids = c["logit_ids"].get<std::vector<int32_t>>();
      const auto ref_logits = c["logits"].get<std::vector<float>>();

      SequenceKvCache cache((*model)->config(), static_cast<int64_t>(prompt.size()));
      std::vector<float> logits;
      (*model)->forward(prompt, 0, cache.view(), false, logits, pool);
      float scale = 0;
      for (float r : ref_logits) scale = std::max(scale, std::abs(r));
      for (size_t i = 0; i < logit_ids.size(); ++i) {
        const double diff = std::abs(logits[static_cast<size_t>(logit_ids[i])] - ref_logits[i]);
        max_abs = std::max(max_abs, diff);
        max_rel = std::max(max_rel, diff / std::max(1.0f, scale));
      }

      EngineRequest request;
      request.prompt_ids = prompt;
      request.max_new_tokens = static_cast<int64_t>(expected_greedy.size());
      request.ignore_eos = true;
      Generator generator(**model, pool);
      auto result = generator.generate(request);
      ASSERT_TRUE(result.ok()) << result.error().message;
      std::vector<int32_t> got;
      for (const auto& t : result->tokens) got.push_back(t.id);
      EXPECT_EQ(got, expected_greedy) << "prompt of " << prompt.size() << " tokens";
    }
    // Relative to the largest reference logit of the case (F32 math in both; HF reference upcasts
    // F16/BF16 weights exactly as we do).
    std::cout << "[ measured ] " << GetParam() << " (" << fs::path(path).filename().string()
              << "): max |logit diff| " << max_abs << ", relative " << max_rel << "\n";
    EXPECT_LT(max_rel, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReferenceModel, ::testing::ValuesIn(reference_variants()),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace lm
