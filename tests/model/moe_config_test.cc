// MoE configs from config.json as transformers reads them (Mixtral, Qwen2-MoE, Qwen3-MoE): expert
// counts, widths, renormalization, which layers are sparse, defaults for missing keys, refusals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/model_config.h"

namespace lm {
namespace {

using Json = nlohmann::json;

Json base(const char* arch) {
  return Json{{"architectures", {arch}},   {"vocab_size", 32000},    {"hidden_size", 1024},
              {"intermediate_size", 2816}, {"num_hidden_layers", 4}, {"num_attention_heads", 16},
              {"num_key_value_heads", 4}};
}

Result<ModelConfig> parse(const Json& j) { return parse_hf_config(j.dump(), "config.json"); }

TEST(MoeConfig, MixtralEveryLayerSparseExpertsAsWideAsIntermediate) {
  Json j = base("MixtralForCausalLM");
  j["num_local_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, Architecture::kMixtral);
  EXPECT_EQ(c->moe.num_experts, 8);
  EXPECT_EQ(c->moe.num_experts_per_tok, 2);
  EXPECT_EQ(c->moe.expert_intermediate_size, 2816);
  EXPECT_EQ(c->moe.shared_expert_intermediate_size, 0);
  EXPECT_TRUE(c->moe.norm_topk_prob);
  EXPECT_EQ(c->moe.sparse_layers, std::vector<bool>(4, true));
  // MixtralConfig's window defaults to none (Mistral's to 4096).
  EXPECT_EQ(c->sliding_window_of(0), 0);
  j["sliding_window"] = 4096;
  c = parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->sliding_window_of(3), 4096);
}

TEST(MoeConfig, Qwen2MoeSharedExpertAndDefaults) {
  Json j = base("Qwen2MoeForCausalLM");
  auto c = parse(j);  // Qwen2MoeConfig's defaults: 60 experts, top-4, 1408 wide, shared 5632
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, Architecture::kQwen2Moe);
  EXPECT_EQ(c->moe.num_experts, 60);
  EXPECT_EQ(c->moe.num_experts_per_tok, 4);
  EXPECT_EQ(c->moe.expert_intermediate_size, 1408);
  EXPECT_EQ(c->moe.shared_expert_intermediate_size, 5632);
  EXPECT_FALSE(c->moe.norm_topk_prob);
  EXPECT_TRUE(c->attention_bias);  // qkv_bias defaults on
  j["qkv_bias"] = false;
  c = parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->attention_bias);
}

TEST(MoeConfig, QwenDenseLayersFromSparseStepAndMlpOnlyLayers) {
  Json j = base("Qwen3MoeForCausalLM");
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  j["moe_intermediate_size"] = 768;
  j["norm_topk_prob"] = true;
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->moe.num_experts, 128);
  EXPECT_EQ(c->moe.num_experts_per_tok, 8);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_TRUE(c->moe.norm_topk_prob);
  // Layer i is sparse when (i + 1) % step == 0 and it is not in mlp_only_layers.
  EXPECT_EQ(c->moe.sparse_layers, (std::vector<bool>{false, true, false, false}));
  EXPECT_TRUE(c->is_sparse_layer(1));
  EXPECT_FALSE(c->is_sparse_layer(3));
}

TEST(MoeConfig, RefusesImpossibleRouting) {
  Json j = base("MixtralForCausalLM");
  j["num_local_experts"] = 4;
  j["num_experts_per_tok"] = 5;
  auto c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("num_experts_per_tok"), std::string::npos) << c.error().message;
  j = base("Qwen3MoeForCausalLM");
  j["mlp_only_layers"] = {7};  // only 4 layers
  c = parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("mlp_only_layers"), std::string::npos) << c.error().message;
  j = base("Qwen3MoeForCausalLM");
  j["num_experts"] = 0;
  EXPECT_FALSE(parse(j).ok());
  j = base("Qwen3MoeForCausalLM");
  j["attention_bias"] = true;
  EXPECT_FALSE(parse(j).ok());
}

TEST(MoeConfig, ModelTypesNameTheArchitectures) {
  for (const auto& [model_type, arch] :
       std::vector<std::pair<std::string, Architecture>>{{"mixtral", Architecture::kMixtral},
                                                         {"qwen2_moe", Architecture::kQwen2Moe},
                                                         {"qwen3_moe", Architecture::kQwen3Moe}}) {
    Json j = base("x");
    j.erase("architectures");
    j["model_type"] = model_type;
    auto c = parse(j);
    ASSERT_TRUE(c.ok()) << model_type << ": " << c.error().message;
    EXPECT_EQ(c->architecture, arch) << model_type;
  }
}

}  // namespace
}  // namespace lm
