// The Q4_1 GGUF as shipped against llama.cpp (llama-cpp-python, same file, same token sequences;
// fixture from scripts/fixtures/make_llamacpp_references.py). llama.cpp quantizes activations to
// 8 bits for its Q4_1 dot products while we keep them in fp32, so logits differ slightly and we
// require top-1 agreement on at least 95% of positions, as the issue asks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/llama_model.h"
#include "runtime/kv_cache.h"

namespace lm {
namespace {

TEST(LlamaCppAgreement, DefaultModelTopOneAgreesOnAtLeast95Percent) {
  std::ifstream in(LM_REPO_ROOT "/tests/fixtures/models/smollm2-q4_1-llamacpp.json");
  const auto fixture = nlohmann::json::parse(in);
  auto model = LlamaModel::load(LM_REPO_ROOT "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_TRUE(model.ok()) << model.error().message;
  const int64_t vocab = (*model)->config().vocab_size;
  ThreadPool pool(2);
  int64_t positions = 0, agree = 0;
  double max_argmax_logit_diff = 0;
  for (const auto& c : fixture["cases"]) {
    const auto ids = c["token_ids"].get<std::vector<int32_t>>();
    const auto ref_argmax = c["argmax_ids"].get<std::vector<int32_t>>();
    const auto ref_argmax_logits = c["argmax_logits"].get<std::vector<float>>();
    SequenceKvCache cache((*model)->config(), static_cast<int64_t>(ids.size()));
    std::vector<float> logits;
    (*model)->forward(ids, 0, cache.view(), /*all_logits=*/true, logits, pool);
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      const float* row = logits.data() + static_cast<int64_t>(pos) * vocab;
      const auto ours = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
      ++positions;
      agree += ours == ref_argmax[pos];
      max_argmax_logit_diff =
          std::max(max_argmax_logit_diff,
                   static_cast<double>(std::abs(row[ref_argmax[pos]] - ref_argmax_logits[pos])));
    }
  }
  const double rate = static_cast<double>(agree) / static_cast<double>(positions);
  std::cout << "[ measured ] top-1 agreement with llama.cpp: " << agree << "/" << positions << " ("
            << 100 * rate << "%), max |logit diff| at llama.cpp's argmax: " << max_argmax_logit_diff
            << "\n";
  EXPECT_GE(rate, 0.95);
}

}  // namespace
}  // namespace lm
