// The Q4_1 GGUF as shipped against llama.cpp (llama-cpp-python, same file, same token sequences;
// fixture from scripts/fixtures/make_llamacpp_references.py). llama.cpp quantizes activations to
// 8 bits for its Q4_1 dot products; by default we keep them in fp32, so logits differ slightly and
// we require top-1 agreement on at least 95% of positions, as the issue asks. The int8 case runs
// with set_int8_activations(true), llama.cpp's numerics, and prints both rates; on a CPU with the
// interleaved int8 GEMM (AVX-512 VNNI) that case also interleaves every Linear weight, so this
// pins that kernel against llama.cpp as well.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "../common/sequence_forward.h"
#include "kernels/cpu/matmul.h"
#include "model/llama_model.h"

namespace lm {
namespace {

struct Agreement {
  int64_t positions = 0;
  int64_t agree = 0;
  double max_argmax_logit_diff = 0;
  std::vector<std::vector<float>> last_logits;  // per case, at its last position
  double rate() const { return static_cast<double>(agree) / static_cast<double>(positions); }
};

// Top-1 agreement over the fixture's positions, with fp32 or int8-quantized activations.
Agreement measure_agreement(bool int8_activations) {
  // Development only: LM_LLAMACPP_REFERENCE names another fixture of make_llamacpp_references.py
  // (--gguf FILE --out FIXTURE), e.g. for a Q4_K_M file made with llama-quantize.
  const char* other = std::getenv("LM_LLAMACPP_REFERENCE");
  std::ifstream in(other ? other
                         : LM_REPO_ROOT "/tests/fixtures/models/smollm2-q4_1-llamacpp.json");
  const auto fixture = nlohmann::json::parse(in);
  auto model = LlamaModel::load(other ? fixture["gguf"].get<std::string>()
                                      : LM_REPO_ROOT "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) return {};
  (*model)->set_int8_activations(int8_activations);
  const int64_t layers = (*model)->config().num_hidden_layers;
  const bool interleaves = int8_activations && kernels::has_interleaved_matmul();
  // Seven Linears per layer and the (tied) LM head.
  EXPECT_EQ((*model)->num_interleaved_weights(), interleaves ? 7 * layers + 1 : 0);
  const int64_t vocab = (*model)->config().vocab_size;
  ThreadPool pool(2);
  Agreement a;
  for (const auto& c : fixture["cases"]) {
    const auto ids = c["token_ids"].get<std::vector<int32_t>>();
    const auto ref_argmax = c["argmax_ids"].get<std::vector<int32_t>>();
    const auto ref_argmax_logits = c["argmax_logits"].get<std::vector<float>>();
    SequenceForward sequence(**model, static_cast<int64_t>(ids.size()));
    const std::vector<float> logits = sequence.run(ids, /*all_logits=*/true, pool);
    a.last_logits.emplace_back(logits.end() - vocab, logits.end());
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      const float* row = logits.data() + static_cast<int64_t>(pos) * vocab;
      const auto ours = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
      ++a.positions;
      a.agree += ours == ref_argmax[pos];
      a.max_argmax_logit_diff =
          std::max(a.max_argmax_logit_diff,
                   static_cast<double>(std::abs(row[ref_argmax[pos]] - ref_argmax_logits[pos])));
    }
  }
  std::cout << "[ measured ] top-1 agreement with llama.cpp ("
            << (int8_activations ? "int8" : "fp32") << " activations): " << a.agree << "/"
            << a.positions << " (" << 100 * a.rate()
            << "%), max |logit diff| at llama.cpp's argmax: " << a.max_argmax_logit_diff << "\n";
  return a;
}

TEST(LlamaCppAgreement, DefaultModelTopOneAgreesOnAtLeast95Percent) {
  EXPECT_GE(measure_agreement(/*int8_activations=*/false).rate(), 0.95);
}

// llama.cpp's own numerics: activations quantized to int8 per block of 32 for the Q4_1 dots.
TEST(LlamaCppAgreement, Int8ActivationsTopOneAgreesOnAtLeast95Percent) {
  const Agreement fp32 = measure_agreement(/*int8_activations=*/false);
  const Agreement int8 = measure_agreement(/*int8_activations=*/true);
  std::cout << "[ measured ] agreement fp32 " << 100 * fp32.rate() << "% vs int8 "
            << 100 * int8.rate() << "%; max |logit diff| fp32 " << fp32.max_argmax_logit_diff
            << " vs int8 " << int8.max_argmax_logit_diff << "\n";
  ASSERT_EQ(fp32.last_logits.size(), int8.last_logits.size());
  for (size_t c = 0; c < fp32.last_logits.size(); ++c) {
    float max_diff = 0.0f;
    for (size_t i = 0; i < fp32.last_logits[c].size(); ++i)
      max_diff = std::max(max_diff, std::abs(fp32.last_logits[c][i] - int8.last_logits[c][i]));
    std::cout << "[ measured ] case " << c << ": max |logit diff| fp32 vs int8 activations at the "
              << "last position: " << max_diff << "\n";
  }
  EXPECT_GE(int8.rate(), 0.95);
}

}  // namespace
}  // namespace lm
