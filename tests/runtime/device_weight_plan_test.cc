// What the CUDA runner uploads for real checkpoints (the default GGUF model and the HF fixture
// models): every weight placed once, aligned, in a format a device kernel reads, and the models
// with parts the runner lacks refused by name.
#include "runtime/device_weight_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>

#include "model/llama_model.h"

namespace lm {
namespace {

namespace fs = std::filesystem;
const fs::path kTestModels = fs::path(LM_BUILD_ROOT) / "test-models";
const std::string kDefaultModel =
    std::string(LM_REPO_ROOT) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

std::unique_ptr<LlamaModel> load(const std::string& path) {
  auto model = LlamaModel::load(path);
  EXPECT_TRUE(model.ok()) << path << ": " << (model.ok() ? "" : model.error().message);
  return model.ok() ? std::move(*model) : nullptr;
}

// Offsets aligned, in order, never overlapping, inside the arena.
void expect_packed(const DeviceWeightPlan& plan) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const DeviceMatrix& m : plan.matrices) {
    EXPECT_EQ(m.bytes, m.rows * kernels::row_bytes(m.device, m.cols)) << m.name;
    ranges.emplace_back(m.offset, m.bytes);
  }
  for (const DeviceVector& v : plan.vectors)
    ranges.emplace_back(v.offset, static_cast<int64_t>(v.values.size() * sizeof(float)));
  std::sort(ranges.begin(), ranges.end());
  int64_t end = 0;
  for (const auto& [offset, bytes] : ranges) {
    EXPECT_EQ(offset % kDeviceArenaAlignment, 0);
    EXPECT_GE(offset, end);
    end = offset + bytes;
  }
  EXPECT_LE(end, plan.arena_bytes);
}

TEST(DeviceWeightPlan, TheDefaultModelKeepsItsQuantizedRowsAndGathersFromAFloatTable) {
  auto model = load(kDefaultModel);
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  auto plan = plan_device_weights(c, model->weights());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  expect_packed(*plan);
  ASSERT_EQ(plan->layers.size(), static_cast<size_t>(c.num_hidden_layers));
  int64_t kept_quantized = 0, converted = 0;
  for (const DeviceMatrix& m : plan->matrices) {
    EXPECT_TRUE(device_reads_stored_format(m.device)) << m.name;
    if (m.converted()) {
      ++converted;
      EXPECT_EQ(m.device, kernels::RowFormat::kF16) << m.name;
      EXPECT_TRUE(!device_reads_stored_format(m.stored) || m.name == "embed_tokens") << m.name;
    } else if (m.device == kernels::RowFormat::kQ4_1) {
      ++kept_quantized;
    }
  }
  EXPECT_EQ(converted, plan->num_converted);
  EXPECT_GT(kept_quantized, 0);
  // The gather reads a float table, whatever the file stores.
  const DeviceMatrix& embed = plan->matrices[static_cast<size_t>(plan->embed_tokens)];
  EXPECT_TRUE(embed.device == kernels::RowFormat::kF16 ||
              embed.device == kernels::RowFormat::kF32 ||
              embed.device == kernels::RowFormat::kBF16);
  EXPECT_EQ(embed.rows, c.vocab_size);
  EXPECT_EQ(plan->vectors[static_cast<size_t>(plan->rope_inv_freq)].values.size(),
            static_cast<size_t>(c.head_dim / 2));
  EXPECT_NE(plan->summary().find("on the device"), std::string::npos) << plan->summary();
}

TEST(DeviceWeightPlan, ATiedHeadInTheTablesFormatIsUploadedOnce) {
  auto model = load((kTestModels / "llama_gqa_tied_sharded").string());
  ASSERT_TRUE(model);
  auto plan = plan_device_weights(model->config(), model->weights());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  expect_packed(*plan);
  EXPECT_EQ(plan->embed_tokens, plan->lm_head);
  EXPECT_EQ(plan->num_converted, 0);
  EXPECT_EQ(plan->max_dequantized_elements > 0,
            std::any_of(plan->matrices.begin(), plan->matrices.end(), [](const DeviceMatrix& m) {
              return m.device == kernels::RowFormat::kF32;
            }));
}

// A GPTQ checkpoint with groups of 128 is held as our Q4_Z128, which no device kernel reads: it
// goes up re-encoded exactly into GGML's blocks (Q4_0 where every value is a Q4_0 level, Q8_0
// otherwise: this fixture's zero points are random), never as F16.
TEST(DeviceWeightPlan, Q4Z128GoesUpAsGgmlBlocksNotF16) {
  auto model = load(std::string(LM_REPO_ROOT) + "/tests/fixtures/quantized/gptq_v2_4bit_g128_asym");
  ASSERT_TRUE(model);
  auto plan = plan_device_weights(model->config(), model->weights());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  expect_packed(*plan);
  int64_t from_q4_z128 = 0;
  for (const DeviceMatrix& m : plan->matrices) {
    if (m.stored != kernels::RowFormat::kQ4_Z128) continue;
    ++from_q4_z128;
    EXPECT_TRUE(m.device == kernels::RowFormat::kQ8_0 || m.device == kernels::RowFormat::kQ4_0)
        << m.name;
    EXPECT_TRUE(device_reads_stored_format(m.device));
    EXPECT_TRUE(m.converted());
  }
  EXPECT_EQ(from_q4_z128, 14);  // 2 layers x 7 Linears
  EXPECT_NE(plan->summary().find("q8_0 from q4_z128"), std::string::npos) << plan->summary();
}

TEST(DeviceWeightPlan, Qwen2sBiasesAreUploaded) {
  auto model = load((kTestModels / "qwen2").string());
  ASSERT_TRUE(model);
  auto plan = plan_device_weights(model->config(), model->weights());
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  for (const DeviceLayerSlots& slots : plan->layers) {
    ASSERT_GE(slots.q_bias, 0);
    EXPECT_EQ(plan->vectors[static_cast<size_t>(slots.q_bias)].values.size(),
              static_cast<size_t>(plan->matrices[static_cast<size_t>(slots.q_proj)].rows));
    EXPECT_GE(slots.k_bias, 0);
    EXPECT_GE(slots.v_bias, 0);
  }
}

TEST(DeviceWeightPlan, ModelsWithPartsTheRunnerLacksAreRefusedByName) {
  for (const auto& [name, part] : {std::pair{"mixtral", "mixture-of-experts"},
                                   {"qwen3", "query/key norms"},
                                   {"gemma2", "Gemma"},
                                   {"qwen2_sliding", "sliding-window"},
                                   {"mistral", "sliding-window"},
                                   {"phi3_longrope", "length"},
                                   {"llama_rope_dynamic", "length"},
                                   {"phi3_partial_rotary", "part of each head"}}) {
    auto model = load((kTestModels / name).string());
    ASSERT_TRUE(model) << name;
    auto plan = plan_device_weights(model->config(), model->weights());
    ASSERT_FALSE(plan.ok()) << name;
    EXPECT_NE(plan.error().message.find(part), std::string::npos) << plan.error().message;
    EXPECT_NE(plan.error().message.find("use --device cpu"), std::string::npos);
  }
  for (const char* name :
       {"llama_mha_untied", "llama_gqa_tied_sharded", "llama3_rope", "qwen2", "qwen2_yarn"}) {
    auto model = load((kTestModels / name).string());
    ASSERT_TRUE(model) << name;
    EXPECT_TRUE(check_cuda_runner_supports(model->config()).ok()) << name;
  }
}

}  // namespace
}  // namespace lm
