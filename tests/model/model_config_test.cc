#include "model/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/rope_frequencies.h"

namespace lm {
namespace {

using Json = nlohmann::json;

Json llama_config() {
  return Json{{"architectures", {"LlamaForCausalLM"}},
              {"vocab_size", 32000},
              {"hidden_size", 4096},
              {"intermediate_size", 11008},
              {"num_hidden_layers", 32},
              {"num_attention_heads", 32},
              {"num_key_value_heads", 32},
              {"max_position_embeddings", 4096},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 10000.0},
              {"rope_scaling", nullptr},
              {"eos_token_id", 2},
              {"bos_token_id", 1}};
}

std::string error_of(const Json& j) {
  auto r = parse_hf_config(j.dump(), "config.json");
  return r.ok() ? "" : r.error().message;
}

TEST(ModelConfig, ParsesLlama2) {
  auto c = parse_hf_config(llama_config().dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, Architecture::kLlama);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->num_key_value_heads, 32);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(c->rope.type, RopeType::kDefault);
  EXPECT_FALSE(c->tie_word_embeddings);
}

TEST(ModelConfig, ParsesRopeScalingInBothKeyStyles) {
  Json j = llama_config();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  auto c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope.type, RopeType::kLinear);
  EXPECT_EQ(c->rope.factor, 4.0);
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope.type, RopeType::kLlama3);
  EXPECT_EQ(c->rope.original_max_position_embeddings, 8192);
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 2.0}, {"rope_theta", 1e6}};
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope.type, RopeType::kDynamic);
  EXPECT_EQ(c->rope.theta, 1e6);
}

TEST(ModelConfig, Qwen2HasBiasAndEosList) {
  Json j = llama_config();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["eos_token_id"] = {2, 7};
  auto c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->attention_bias);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{2, 7}));
}

TEST(ModelConfig, RejectsWrongTypesAndValues) {
  auto with = [](const char* key, Json value) {
    Json j = llama_config();
    j[key] = std::move(value);
    return error_of(j);
  };
  EXPECT_NE(with("hidden_size", "4096").find("'hidden_size' should be an integer"),
            std::string::npos);
  EXPECT_NE(with("rms_norm_eps", "small").find("'rms_norm_eps' should be a number"),
            std::string::npos);
  EXPECT_NE(with("hidden_size", -1).find("hidden_size = -1 is outside"), std::string::npos);
  EXPECT_NE(with("num_hidden_layers", 1 << 30).find("num_hidden_layers"), std::string::npos);
  EXPECT_NE(with("num_key_value_heads", 5).find("not a multiple"), std::string::npos);
  EXPECT_NE(with("vocab_size", 1ll << 40).find("vocab_size"), std::string::npos);
  EXPECT_NE(with("eos_token_id", "</s>").find("token id"), std::string::npos);
  EXPECT_NE(with("eos_token_id", 99999).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(with("tie_word_embeddings", 1).find("should be a boolean"), std::string::npos);
  EXPECT_NE(with("rope_scaling", Json{{"type", "yarn"}, {"factor", 2}})
                .find("unsupported rope scaling type 'yarn'"),
            std::string::npos);
  EXPECT_NE(with("architectures", Json{"GPT2LMHeadModel"})
                .find("LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM"),
            std::string::npos);
  Json missing = llama_config();
  missing.erase("hidden_size");
  EXPECT_NE(error_of(missing).find("missing required field 'hidden_size'"), std::string::npos);
  EXPECT_NE(error_of(Json::array()).find("not a JSON object"), std::string::npos);
  auto r = parse_hf_config("{not json", "x/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("x/config.json"), std::string::npos);
}

TEST(RopeFrequencies, ScalingTypes) {
  ModelConfig c = *parse_hf_config(llama_config().dump(), "config.json");
  c.head_dim = 8;
  auto base = rope_frequencies(c, 10).inv_freq;
  ASSERT_EQ(base.size(), 4u);
  EXPECT_FLOAT_EQ(base[0], 1.0f);
  EXPECT_NEAR(base[1], 0.1f, 1e-7);  // 10000^(-2/8)
  c.rope.type = RopeType::kLinear;
  c.rope.factor = 2;
  EXPECT_NEAR(rope_frequencies(c, 10).inv_freq[1], 0.05f, 1e-7);
  c.rope.type = RopeType::kDynamic;
  // Below the trained length dynamic is the default; past it the base grows.
  EXPECT_EQ(rope_frequencies(c, 10).inv_freq, base);
  EXPECT_LT(rope_frequencies(c, 3 * c.max_position_embeddings).inv_freq[3], base[3]);
  c.rope.type = RopeType::kLlama3;
  c.rope.factor = 8;
  c.rope.original_max_position_embeddings = 64;
  auto llama3 = rope_frequencies(c, 10).inv_freq;
  EXPECT_EQ(llama3[0], base[0]);            // high frequency: unchanged
  EXPECT_FLOAT_EQ(llama3[3], base[3] / 8);  // low frequency: divided by factor
}

}  // namespace
}  // namespace lm
