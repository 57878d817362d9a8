// A Llama GGUF with Q4_K_M's mix of K-quant matrices (Q4_K, Q5_K, Q6_K), and one with the low-bit
// formats of llama.cpp's Q2_K / Q3_K_* / IQ4_* files (Q2_K, Q3_K, IQ4_NL, IQ4_XS), each against
// its float32 twin (the same weights dequantized by gguf-py;
// scripts/fixtures/make_kquant_checkpoint.py, written by `make fixtures-test`): the kernels must
// compute the twin's logits. With int8 activations (llama.cpp's numerics for these formats) the
// logits move by the activation rounding only, which is measured and bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "../common/sequence_forward.h"
#include "kernels/cpu/matmul.h"
#include "model/llama_model.h"
#include "model/weight_dtype.h"

namespace lm {
namespace {

constexpr const char* kDir = LM_BUILD_ROOT "/test-models/kquant-gguf";

std::vector<float> all_logits(LlamaModel& model, const std::vector<int32_t>& ids) {
  ThreadPool pool(2);
  SequenceForward sequence(model, static_cast<int64_t>(ids.size()));
  return sequence.run(ids, /*all_logits=*/true, pool);
}

// The same sequence one token per forward call: the decode path (one dot per weight row).
std::vector<float> decode_logits(LlamaModel& model, const std::vector<int32_t>& ids) {
  ThreadPool pool(2);
  SequenceForward sequence(model, static_cast<int64_t>(ids.size()));
  std::vector<float> all;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::vector<float> step =
        sequence.run(std::span<const int32_t>(&ids[i], 1), /*all_logits=*/false, pool);
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

struct Diff {
  float max_abs = 0.0f;
  float max_logit = 0.0f;
  int64_t argmax_agree = 0;
  int64_t positions = 0;
};

Diff compare(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
  Diff d;
  for (size_t i = 0; i < a.size(); ++i) {
    d.max_abs = std::max(d.max_abs, std::abs(a[i] - b[i]));
    d.max_logit = std::max(d.max_logit, std::abs(b[i]));
  }
  for (size_t row = 0; row < a.size() / static_cast<size_t>(vocab); ++row) {
    const float* ra = a.data() + row * vocab;
    const float* rb = b.data() + row * vocab;
    ++d.positions;
    d.argmax_agree +=
        std::max_element(ra, ra + vocab) - ra == std::max_element(rb, rb + vocab) - rb;
  }
  return d;
}

// The quantized model `file` against its float32 twin: prefill and token-by-token decode within
// fp32 rounding of the twin, then with int8 activations within the activation rounding.
// int8_tolerance: the bound on the int8 path's logit error, relative to the largest logit.
// num_interleaved: the weight matrices the int8 path must interleave where this CPU has the
// interleaved GEMM (-1: not checked).
void expect_twin_logits(const std::string& file, const std::string& twin_file,
                        const std::string& label, float int8_tolerance = 0.02f,
                        int64_t num_interleaved = -1) {
  auto kq = LlamaModel::load(std::string(kDir) + "/" + file);
  ASSERT_TRUE(kq.ok()) << kq.error().message;
  auto twin = LlamaModel::load(std::string(kDir) + "/" + twin_file);
  ASSERT_TRUE(twin.ok()) << twin.error().message;
  const int64_t vocab = (*twin)->config().vocab_size;
  const std::vector<int32_t> ids = {1, 17, 300, 42, 511, 7, 7, 128, 256, 3, 99, 400, 0, 250};
  const auto expected = all_logits(**twin, ids);
  ASSERT_GT(*std::max_element(expected.begin(), expected.end()), 0.1f) << "degenerate model";

  const Diff fp32 = compare(all_logits(**kq, ids), expected, vocab);
  std::cout << "[ measured ] " << label << " GGUF vs dequantized twin: max |logit diff| "
            << fp32.max_abs << " (max |logit| " << fp32.max_logit << "), top-1 "
            << fp32.argmax_agree << "/" << fp32.positions << "\n";
  EXPECT_LE(fp32.max_abs, 1e-4f * fp32.max_logit + 1e-5f);
  EXPECT_EQ(fp32.argmax_agree, fp32.positions);

  const Diff decode = compare(decode_logits(**kq, ids), expected, vocab);
  std::cout << "[ measured ] " << label << " token-by-token decode: max |logit diff| "
            << decode.max_abs << "\n";
  EXPECT_LE(decode.max_abs, 1e-4f * decode.max_logit + 1e-5f);
  EXPECT_EQ(decode.argmax_agree, decode.positions);

  (*kq)->set_int8_activations(true);
  if (num_interleaved >= 0 && kernels::has_interleaved_matmul()) {
    EXPECT_EQ((*kq)->num_interleaved_weights(), num_interleaved);
  }
  const Diff int8 = compare(all_logits(**kq, ids), expected, vocab);
  std::cout << "[ measured ] " << label << " with int8 activations: max |logit diff| "
            << int8.max_abs << ", top-1 " << int8.argmax_agree << "/" << int8.positions << "\n";
  // Each activation moves by at most half of max|x| / 127 per block of 32: ~0.4% relative.
  EXPECT_LE(int8.max_abs, int8_tolerance * int8.max_logit);
  EXPECT_GT(int8.max_abs, 0.0f) << "int8 activations were not used";
}

TEST(KquantModel, LogitsEqualTheDequantizedTwin) {
  expect_twin_logits("model-kquants.gguf", "model-f32.gguf", "K-quant");
}

// Q2_K, Q3_K, IQ4_NL and IQ4_XS matrices, embedding and output (GGUF type ids 10, 11, 20, 23).
TEST(KquantModel, LowbitLogitsEqualTheDequantizedTwin) {
  auto model = LlamaModel::load(std::string(kDir) + "/model-lowbit.gguf");
  ASSERT_TRUE(model.ok()) << model.error().message;
  const WeightsSummary summary = summarize_weights((*model)->weights());
  for (const char* dtype : {"Q2_K", "Q3_K", "IQ4_NL", "IQ4_XS"})
    EXPECT_NE(summary.stored_dtypes.find(dtype), std::string::npos) << summary.stored_dtypes;
  // Every Linear (7 per layer, 2 layers, and the head) takes the interleaved int8 GEMM.
  expect_twin_logits("model-lowbit.gguf", "model-lowbit-f32.gguf", "Q2_K/Q3_K/IQ4_NL/IQ4_XS",
                     /*int8_tolerance=*/0.02f, /*num_interleaved=*/15);
}

// A Mixtral-shaped MoE: every expert's matrices are slices of GGUF's [experts, rows, cols]
// stacks in six block formats; tokens grouped per expert must give the twin's logits, with fp32
// and with int8 activations (where the stacks' slices are interleaved like any Linear).
TEST(KquantModel, MoeExpertStacksEqualTheDequantizedTwin) {
  auto model = LlamaModel::load(std::string(kDir) + "/model-moe.gguf");
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ((*model)->config().architecture, Architecture::kMixtral);
  EXPECT_EQ((*model)->config().moe.num_experts, 4);
  const WeightsSummary summary = summarize_weights((*model)->weights());
  for (const char* dtype : {"Q4_K", "Q8_0", "Q6_K", "Q4_0", "IQ4_XS", "Q5_K"})
    EXPECT_NE(summary.stored_dtypes.find(dtype), std::string::npos) << summary.stored_dtypes;
  // The activation rounding can also flip a near-tied routing choice (another expert's output,
  // as llama.cpp's int8 path may), so the int8 bound is looser than for dense models.
  expect_twin_logits("model-moe.gguf", "model-moe-f32.gguf", "MoE experts",
                     /*int8_tolerance=*/0.05f);
}

}  // namespace
}  // namespace lm
