#include "model/model_config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <variant>

#include <nlohmann/json.hpp>

#include "loader/gguf_file.h"
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

// transformers' rules for which layers use the sliding window.
TEST(ModelConfig, SlidingWindowLayersFollowTransformers) {
  auto windows = [](Json j) {
    auto c = parse_hf_config(j.dump(), "config.json");
    EXPECT_TRUE(c.ok()) << c.error().message;
    std::vector<int64_t> w;
    for (int64_t i = 0; c.ok() && i < c->num_hidden_layers; ++i)
      w.push_back(c->sliding_window_of(i));
    return w;
  };
  Json j = llama_config();
  j["num_hidden_layers"] = 4;
  j["sliding_window"] = 4096;  // Llama has no window, whatever the config says
  EXPECT_EQ(windows(j), (std::vector<int64_t>{0, 0, 0, 0}));
  j["architectures"] = {"MistralForCausalLM"};  // Mistral-7B-v0.1: every layer
  EXPECT_EQ(windows(j), (std::vector<int64_t>{4096, 4096, 4096, 4096}));
  j["sliding_window"] = nullptr;  // v0.2+: none
  EXPECT_EQ(windows(j), (std::vector<int64_t>{0, 0, 0, 0}));
  // Qwen2: only with use_sliding_window, from max_window_layers on.
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["sliding_window"] = 32768;
  j["max_window_layers"] = 2;
  EXPECT_EQ(windows(j), (std::vector<int64_t>{0, 0, 0, 0}));
  j["use_sliding_window"] = true;
  EXPECT_EQ(windows(j), (std::vector<int64_t>{0, 0, 32768, 32768}));
  // An explicit layer_types list (transformers 5 writes one) wins.
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  EXPECT_EQ(windows(j), (std::vector<int64_t>{32768, 0, 32768, 0}));
  j["layer_types"] = {"sliding_attention"};
  EXPECT_NE(error_of(j).find("'layer_types' should be a list with one entry per layer"),
            std::string::npos);
  j["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention", "full_attention"};
  EXPECT_NE(error_of(j).find("'full_attention' or 'sliding_attention'"), std::string::npos);
  j.erase("layer_types");
  j["sliding_window"] = 0;
  EXPECT_NE(error_of(j).find("sliding_window = 0 is not positive"), std::string::npos);
}

TEST(ModelConfig, Qwen3HasQkNormsAndItsOwnHeadDim) {
  Json j = llama_config();
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["head_dim"] = 256;
  auto c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, Architecture::kQwen3);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->head_dim, 256);
  j["attention_bias"] = true;  // would bias o_proj too: refused rather than half applied
  EXPECT_NE(error_of(j).find("attention_bias on Qwen3 is not supported"), std::string::npos);
}

// Keys a config leaves out take transformers' defaults; an explicit null means none.
TEST(ModelConfig, MissingKeysTakeTransformersDefaults) {
  Json j = llama_config();
  j["architectures"] = {"MistralForCausalLM"};
  auto c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->sliding_window_of(0), 4096);  // MistralConfig's default
  j["sliding_window"] = nullptr;
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->sliding_window_of(0), 0);
  j = llama_config();
  j["architectures"] = {"Gemma2ForCausalLM"};
  j["head_dim"] = 128;
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c->attn_logit_softcapping, 50.0);
  EXPECT_EQ(c->final_logit_softcapping, 30.0);
  EXPECT_EQ(c->sliding_window_of(0), 4096);
  j["architectures"] = {"Gemma3ForCausalLM"};
  j.erase("rope_theta");
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->attn_logit_softcapping, 0.0);
  EXPECT_EQ(c->rope_of(5).theta, 1000000.0);
  EXPECT_EQ(c->rope_of(0).theta, 10000.0);
  j["attention_bias"] = true;
  EXPECT_NE(error_of(j).find("attention_bias on Gemma"), std::string::npos);
  j = llama_config();
  j["model_type"] = "phi3";  // no architectures list: model_type decides
  j.erase("architectures");
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, Architecture::kPhi3);
}

// Gemma 1/2/3 as their Hub configs spell them (sizes shrunk).
TEST(ModelConfig, GemmaFamily) {
  Json j = llama_config();
  j["architectures"] = {"GemmaForCausalLM"};
  j["num_hidden_layers"] = 6;
  j["head_dim"] = 256;
  j["hidden_act"] = "gelu";  // Gemma-2B's legacy spelling of the tanh GELU
  auto c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->gemma_scaling);
  EXPECT_TRUE(c->tie_word_embeddings);  // Gemma's default
  EXPECT_FALSE(c->sandwich_norms);
  EXPECT_EQ(c->mlp_activation, MlpActivation::kGeluTanh);
  EXPECT_EQ(c->sliding_window_of(0), 0);

  j["architectures"] = {"Gemma2ForCausalLM"};
  j.erase("hidden_act");
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["query_pre_attn_scalar"] = 224;
  j["attn_logit_softcapping"] = 50.0;
  j["final_logit_softcapping"] = 30.0;
  j["sliding_window"] = 4096;
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->sandwich_norms);
  EXPECT_EQ(c->query_pre_attn_scalar, 224.0);
  EXPECT_EQ(c->attn_logit_softcapping, 50.0);
  EXPECT_EQ(c->final_logit_softcapping, 30.0);
  EXPECT_EQ(c->sliding_window_of(0), 4096);  // even layers local, odd ones global
  EXPECT_EQ(c->sliding_window_of(1), 0);
  EXPECT_FALSE(c->local_rope);

  j["architectures"] = {"Gemma3ForCausalLM"};
  j.erase("attn_logit_softcapping");
  j.erase("final_logit_softcapping");
  j["sliding_window"] = 512;
  j["rope_theta"] = 1000000.0;
  j["rope_local_base_freq"] = 10000.0;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->qk_norm);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(c->sliding_window_of(i), i == 5 ? 0 : 512) << i;
  ASSERT_TRUE(c->local_rope);
  EXPECT_EQ(c->rope_of(0).theta, 10000.0);  // local: default RoPE at the local base
  EXPECT_EQ(c->rope_of(0).type, RopeType::kDefault);
  EXPECT_EQ(c->rope_of(5).theta, 1000000.0);  // global: rope_theta with the scaling
  EXPECT_EQ(c->rope_of(5).type, RopeType::kLinear);
  EXPECT_EQ(c->rope_of(5).factor, 8.0);
  j["use_bidirectional_attention"] = true;
  EXPECT_NE(error_of(j).find("use_bidirectional_attention"), std::string::npos);
  j.erase("use_bidirectional_attention");
  j["hidden_activation"] = "relu";
  EXPECT_NE(error_of(j).find("hidden activation 'relu' is not supported"), std::string::npos);
}

TEST(ModelConfig, Phi3FusedProjectionsAndLongRope) {
  Json j = llama_config();
  j["architectures"] = {"Phi3ForCausalLM"};
  j["sliding_window"] = 2047;
  j["max_position_embeddings"] = 131072;
  j["original_max_position_embeddings"] = 4096;
  const std::vector<double> factors(64, 1.5);  // head_dim 128 / 2
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", factors}, {"long_factor", factors}};
  auto c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->fused_projections);
  EXPECT_EQ(c->sliding_window_of(0), 2047);
  EXPECT_EQ(c->rope.type, RopeType::kLongRope);
  EXPECT_EQ(c->rope.original_max_position_embeddings, 4096);
  EXPECT_EQ(c->rope.factor, 32.0);  // max / original, as transformers derives it
  // The attention factor transformers derives: sqrt(1 + ln(32) / ln(4096)).
  EXPECT_FLOAT_EQ(rope_frequencies(*c, 10).attention_scaling,
                  static_cast<float>(std::sqrt(1.0 + std::log(32.0) / std::log(4096.0))));
  // Short factors up to the trained length, long ones past it.
  j["rope_scaling"]["long_factor"] = std::vector<double>(64, 3.0);
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  const float base = rope_frequencies(*c, 4096).inv_freq[5];
  EXPECT_FLOAT_EQ(rope_frequencies(*c, 4097).inv_freq[5] * 2.0f, base);
  j["rope_scaling"]["long_factor"] = std::vector<double>(3, 3.0);
  EXPECT_NE(error_of(j).find("need rotary dims / 2 = 64 entries"), std::string::npos);
  j["rope_scaling"] = nullptr;
  j["partial_rotary_factor"] = 0.75;  // Phi-4-mini: 96 of 128 elements rotate
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rotary_dims(), 96);
  EXPECT_EQ(rope_frequencies(*c, 1).inv_freq.size(), 48u);
  j["partial_rotary_factor"] = 0.7;  // int(89.6): odd
  EXPECT_NE(error_of(j).find("even number of rotary dimensions"), std::string::npos);
}

TEST(ModelConfig, LlamaFamilyRefusesOtherActivations) {
  Json j = llama_config();
  j["hidden_act"] = "gelu";
  EXPECT_NE(error_of(j).find("hidden activation 'gelu' is not supported for LlamaForCausalLM"),
            std::string::npos);
  j["hidden_act"] = "silu";
  EXPECT_EQ(error_of(j), "");
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
  EXPECT_NE(with("rope_scaling", Json{{"type", "ntk-by-parts"}, {"factor", 2}})
                .find("unsupported rope scaling type 'ntk-by-parts'"),
            std::string::npos);
  EXPECT_NE(with("architectures", Json{"GPT2LMHeadModel"}).find(supported_architectures()),
            std::string::npos);
  EXPECT_NE(supported_architectures().find("MixtralForCausalLM"), std::string::npos);
  Json missing = llama_config();
  missing.erase("hidden_size");
  EXPECT_NE(error_of(missing).find("missing required field 'hidden_size'"), std::string::npos);
  EXPECT_NE(error_of(Json::array()).find("not a JSON object"), std::string::npos);
  auto r = parse_hf_config("{not json", "x/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("x/config.json"), std::string::npos);
}

TEST(ModelConfig, YarnAsTransformers) {
  // Qwen2.5-7B-Instruct's 128K setting, as its README tells users to write it.
  Json j = llama_config();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["max_position_embeddings"] = 32768;
  j["rope_theta"] = 1e6;
  j["rope_scaling"] = {
      {"factor", 4.0}, {"original_max_position_embeddings", 32768}, {"type", "yarn"}};
  auto c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope.type, RopeType::kYarn);
  EXPECT_EQ(c->rope.factor, 4.0);
  EXPECT_EQ(c->rope.original_max_position_embeddings, 32768);
  EXPECT_EQ(c->max_context(), 131072);  // what the setting is for
  EXPECT_EQ(c->rope.beta_fast, 32.0);
  EXPECT_EQ(c->rope.beta_slow, 1.0);
  EXPECT_TRUE(c->rope.truncate);
  const RopeFrequencies yarn = rope_frequencies(*c, 10);
  EXPECT_EQ(rope_frequencies(*c, 100000).inv_freq, yarn.inv_freq);  // not length-dependent
  EXPECT_FLOAT_EQ(yarn.attention_scaling, static_cast<float>(0.1 * std::log(4.0) + 1.0));
  ModelConfig plain = *c;
  plain.rope.type = RopeType::kDefault;
  const std::vector<float> base = rope_frequencies(plain, 10).inv_freq;
  // head_dim 128, theta 1e6, 32768 trained: the correction range is floor(23.6) .. ceil(39.6);
  // below it frequencies are kept, above it divided by 4, between a linear blend.
  ASSERT_EQ(yarn.inv_freq.size(), 64u);
  EXPECT_EQ(yarn.inv_freq[23], base[23]);
  EXPECT_NE(yarn.inv_freq[24], base[24]);
  EXPECT_FLOAT_EQ(yarn.inv_freq[40], base[40] / 4);
  EXPECT_NE(yarn.inv_freq[39], base[39] / 4);
  const float ramp = (31.0f - 23.0f) / 17.0f;
  EXPECT_NEAR(yarn.inv_freq[31], base[31] / 4 * ramp + base[31] * (1 - ramp), 1e-6 * base[31]);
  // Without truncation the range is [23.6, 39.65]: the same ends, another blend between.
  j["rope_scaling"]["truncate"] = false;
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(rope_frequencies(*c, 10).inv_freq[23], base[23]);
  const float exact_ramp = (24.0f - 23.596f) / (39.65f - 23.596f);
  EXPECT_NEAR(rope_frequencies(*c, 10).inv_freq[24],
              base[24] / 4 * exact_ramp + base[24] * (1 - exact_ramp), 1e-3 * base[24]);
  EXPECT_NE(rope_frequencies(*c, 10).inv_freq[24], yarn.inv_freq[24]);
}

TEST(ModelConfig, YarnDefaultsAndAttentionFactor) {
  // transformers 5's layout; the trained length defaults to max_position_embeddings, a top-level
  // original_max_position_embeddings wins over the parameters' own, a null factor is derived.
  Json j = llama_config();
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"rope_theta", 5e5}};
  auto c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope.type, RopeType::kYarn);
  EXPECT_EQ(c->rope.theta, 5e5);
  EXPECT_EQ(c->rope.original_max_position_embeddings, 4096);
  j["rope_parameters"]["original_max_position_embeddings"] = 2048;
  j["rope_parameters"]["factor"] = nullptr;
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope.original_max_position_embeddings, 2048);
  EXPECT_EQ(c->rope.factor, 2.0);  // 4096 / 2048
  j["original_max_position_embeddings"] = 1024;
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope.original_max_position_embeddings, 1024);
  EXPECT_EQ(c->rope.factor, 4.0);
  // beta_fast / beta_slow given, 0 meaning the default; mscale over mscale_all_dim (DeepSeek's
  // form); an explicit attention_factor over both.
  j["rope_parameters"] = {{"rope_type", "yarn"},
                          {"factor", 40.0},
                          {"beta_fast", 0},
                          {"beta_slow", 2.0},
                          {"mscale", 1.0},
                          {"mscale_all_dim", 0.5},
                          {"original_max_position_embeddings", 4096}};
  j.erase("original_max_position_embeddings");
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope.beta_fast, 32.0);
  EXPECT_EQ(c->rope.beta_slow, 2.0);
  EXPECT_FLOAT_EQ(rope_frequencies(*c, 1).attention_scaling,
                  static_cast<float>((0.1 * std::log(40.0) + 1) / (0.05 * std::log(40.0) + 1)));
  j["rope_parameters"]["attention_factor"] = 0.8;
  c = parse_hf_config(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FLOAT_EQ(rope_frequencies(*c, 1).attention_scaling, 0.8f);
  // Refusals: no factor at all (transformers raises too), a negative beta.
  j["rope_parameters"].erase("factor");
  EXPECT_NE(error_of(j).find("yarn rope scaling needs a 'factor'"), std::string::npos);
  j["rope_parameters"]["factor"] = 4.0;
  j["rope_parameters"]["beta_slow"] = -1;
  EXPECT_NE(error_of(j).find("beta_fast and beta_slow must be positive"), std::string::npos);
}

// The GGUF twins make_tiny_gguf.py writes as llama.cpp's converter does (make fixtures-test).
ModelConfig twin_config(const std::string& variant) {
  const std::string dir = std::string(LM_BUILD_ROOT) + "/test-models/" + variant;
  auto gguf = GgufFile::open(dir + "-gguf/model.gguf");
  EXPECT_TRUE(gguf.ok()) << gguf.error().message;
  if (!gguf.ok()) return {};
  auto c = config_from_gguf(*gguf);
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? *c : ModelConfig{};
}

ModelConfig hf_config(const std::string& variant) {
  auto c = load_hf_config(std::string(LM_BUILD_ROOT) + "/test-models/" + variant);
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? *c : ModelConfig{};
}

// A GGUF v3 file with the given metadata and zero-filled F32 tensors (outermost dim first), for
// the config_from_gguf cases the converter's twins do not cover.
using GgufValue = std::variant<uint32_t, float, std::string, std::vector<bool>>;
struct GgufSpec {
  std::vector<std::pair<std::string, GgufValue>> kv;
  std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors;
};

Result<ModelConfig> config_of(const GgufSpec& spec) {
  std::string b;
  const auto put = [&b](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  const auto str = [&](const std::string& s) {
    put(uint64_t{s.size()});
    b += s;
  };
  put(uint32_t{0x46554747});
  put(uint32_t{3});
  put(uint64_t{spec.tensors.size()});
  put(uint64_t{spec.kv.size()});
  for (const auto& [key, value] : spec.kv) {
    str(key);
    if (const auto* u = std::get_if<uint32_t>(&value)) {
      put(uint32_t{4});
      put(*u);
    } else if (const auto* f = std::get_if<float>(&value)) {
      put(uint32_t{6});
      put(*f);
    } else if (const auto* flags = std::get_if<std::vector<bool>>(&value)) {
      put(uint32_t{9});  // array
      put(uint32_t{7});  // of bool
      put(uint64_t{flags->size()});
      for (bool flag : *flags) put(static_cast<uint8_t>(flag));
    } else {
      put(uint32_t{8});
      str(std::get<std::string>(value));
    }
  }
  uint64_t offset = 0;
  for (const auto& [name, shape] : spec.tensors) {
    str(name);
    put(static_cast<uint32_t>(shape.size()));
    uint64_t elements = 1;
    for (auto it = shape.rbegin(); it != shape.rend(); ++it) {
      put(*it);
      elements *= *it;
    }
    put(uint32_t{0});  // F32
    put(offset);
    offset += (elements * 4 + 31) / 32 * 32;
  }
  b.resize((b.size() + 31) / 32 * 32 + offset);
  const std::string path = ::testing::TempDir() + "/config_" + std::to_string(::getpid()) + ".gguf";
  std::ofstream(path, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
  auto gguf = GgufFile::open(path);
  if (!gguf.ok()) return gguf.error();
  auto config = config_from_gguf(*gguf);
  std::filesystem::remove(path);
  return config;
}

// The keys every architecture needs: 1 layer, hidden 8, 2 heads of 4, vocabulary 4.
GgufSpec gguf_spec(const std::string& arch) {
  return GgufSpec{{{"general.architecture", arch},
                   {arch + ".embedding_length", uint32_t{8}},
                   {arch + ".feed_forward_length", uint32_t{16}},
                   {arch + ".block_count", uint32_t{1}},
                   {arch + ".attention.head_count", uint32_t{2}},
                   {arch + ".context_length", uint32_t{64}},
                   {arch + ".vocab_size", uint32_t{4}}},
                  {{"token_embd.weight", {4, 8}}}};
}

std::string gguf_error(const GgufSpec& spec) {
  auto c = config_of(spec);
  return c.ok() ? "" : c.error().message;
}

TEST(ModelConfigGguf, PartialRotaryAndLongRopeRefusals) {
  GgufSpec phi3 = gguf_spec("phi3");
  phi3.kv.emplace_back("phi3.rope.dimension_count", uint32_t{2});
  auto c = config_of(phi3);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rotary_dims(), 2);
  EXPECT_EQ(c->rope.type, RopeType::kDefault);  // no factor tensors: plain RoPE
  EXPECT_EQ(c->sliding_window_of(0), 0);
  GgufSpec llama = gguf_spec("llama");
  llama.kv.emplace_back("llama.rope.dimension_count", uint32_t{2});
  EXPECT_NE(gguf_error(llama).find("partial rotary from GGUF is supported for phi3"),
            std::string::npos);
  phi3.kv.emplace_back("phi3.rope.scaling.type", std::string("longrope"));
  EXPECT_NE(gguf_error(phi3).find("longrope needs the rope_factors_long/short.weight tensors"),
            std::string::npos);
  phi3.tensors.push_back({"rope_factors_long.weight", {1}});
  EXPECT_NE(gguf_error(phi3).find("'rope_factors_short.weight' is missing or not F32 [1]"),
            std::string::npos);
  phi3.tensors.push_back({"rope_factors_short.weight", {1}});
  phi3.kv.emplace_back("phi3.attention.sliding_window", uint32_t{8});
  c = config_of(phi3);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope.type, RopeType::kLongRope);
  EXPECT_EQ(c->rope.original_max_position_embeddings, 64);  // llama.cpp's: context_length
  EXPECT_EQ(c->rope.attention_factor, 1.0);                 // llama.cpp's when the key is missing
  EXPECT_EQ(c->sliding_window_of(0), 8);
}

// llama.cpp's attention.sliding_window_pattern: a group size, or one bool per layer.
TEST(ModelConfigGguf, SlidingWindowPatternAsGroupSizeOrPerLayer) {
  GgufSpec gemma3 = gguf_spec("gemma3");
  gemma3.kv.emplace_back("gemma3.block_count", uint32_t{3});
  gemma3.kv.erase(gemma3.kv.begin() + 3);  // the 1-layer block_count of gguf_spec
  gemma3.kv.emplace_back("gemma3.attention.sliding_window", uint32_t{8});
  auto c = config_of(gemma3);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->layer_sliding_windows, (std::vector<int64_t>{8, 8, 8}));  // default 6: all local
  GgufSpec grouped = gemma3;
  grouped.kv.emplace_back("gemma3.attention.sliding_window_pattern", uint32_t{2});
  c = config_of(grouped);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->layer_sliding_windows, (std::vector<int64_t>{8, 0, 8}));
  GgufSpec flags = gemma3;
  flags.kv.emplace_back("gemma3.attention.sliding_window_pattern",
                        std::vector<bool>{false, true, true});
  c = config_of(flags);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->layer_sliding_windows, (std::vector<int64_t>{0, 8, 8}));
  GgufSpec short_list = gemma3;
  short_list.kv.emplace_back("gemma3.attention.sliding_window_pattern",
                             std::vector<bool>{true, false});
  EXPECT_NE(gguf_error(short_list).find("has 2 entries for 3 layers"), std::string::npos);
}

// Experts from GGUF as llama.cpp reads them: a "llama" with experts is Mixtral; Qwen2-MoE's widths
// and its shared expert; experts where llama.cpp has none are refused.
TEST(ModelConfigGguf, Experts) {
  GgufSpec mixtral = gguf_spec("llama");
  mixtral.kv.emplace_back("llama.expert_count", uint32_t{4});
  mixtral.kv.emplace_back("llama.expert_used_count", uint32_t{2});
  auto c = config_of(mixtral);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, Architecture::kMixtral);
  EXPECT_EQ(c->moe.num_experts, 4);
  EXPECT_EQ(c->moe.expert_intermediate_size, 16);  // feed_forward_length
  EXPECT_TRUE(c->moe.norm_topk_prob);
  EXPECT_EQ(c->moe.sparse_layers, std::vector<bool>{true});
  GgufSpec qwen2moe = gguf_spec("qwen2moe");
  qwen2moe.kv.emplace_back("qwen2moe.expert_count", uint32_t{8});
  qwen2moe.kv.emplace_back("qwen2moe.expert_used_count", uint32_t{4});
  qwen2moe.kv.emplace_back("qwen2moe.expert_feed_forward_length", uint32_t{8});
  qwen2moe.kv.emplace_back("qwen2moe.expert_shared_feed_forward_length", uint32_t{32});
  c = config_of(qwen2moe);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, Architecture::kQwen2Moe);
  EXPECT_EQ(c->moe.expert_intermediate_size, 8);
  EXPECT_EQ(c->moe.shared_expert_intermediate_size, 32);
  EXPECT_FALSE(c->moe.norm_topk_prob);  // llama.cpp's qwen2moe does not renormalize
  EXPECT_FALSE(c->attention_bias);      // no attn_q.bias tensor in this file
  GgufSpec no_used = gguf_spec("qwen3moe");
  no_used.kv.emplace_back("qwen3moe.expert_count", uint32_t{8});
  EXPECT_NE(gguf_error(no_used).find("expert_used_count is missing"), std::string::npos);
  EXPECT_NE(gguf_error(gguf_spec("qwen3moe")).find("expert_count is missing"), std::string::npos);
  GgufSpec gemma = gguf_spec("gemma");
  gemma.kv.emplace_back("gemma.expert_count", uint32_t{8});
  EXPECT_NE(gguf_error(gemma).find("experts in a 'gemma' model are not supported"),
            std::string::npos);
}

TEST(ModelConfigGguf, YarnKeys) {
  GgufSpec qwen2 = gguf_spec("qwen2");
  qwen2.kv.emplace_back("qwen2.rope.scaling.type", std::string("yarn"));
  qwen2.kv.emplace_back("qwen2.rope.scaling.factor", 4.0f);
  auto c = config_of(qwen2);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope.type, RopeType::kYarn);
  EXPECT_EQ(c->rope.factor, 4.0);
  EXPECT_EQ(c->rope.original_max_position_embeddings, 64);  // context_length when not given
  EXPECT_EQ(c->rope.beta_fast, 32.0);
  EXPECT_EQ(c->rope.beta_slow, 1.0);
  EXPECT_FALSE(c->rope.attention_factor);
  qwen2.kv.emplace_back("qwen2.rope.scaling.original_context_length", uint32_t{16});
  qwen2.kv.emplace_back("qwen2.rope.scaling.yarn_beta_fast", 8.0f);
  qwen2.kv.emplace_back("qwen2.rope.scaling.yarn_beta_slow", 0.5f);
  qwen2.kv.emplace_back("qwen2.rope.scaling.yarn_log_multiplier", 0.5f);
  c = config_of(qwen2);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope.original_max_position_embeddings, 16);
  EXPECT_EQ(c->rope.beta_fast, 8.0);
  EXPECT_EQ(c->rope.beta_slow, 0.5);
  // llama.cpp's mscale 1 over mscale_all_dim = yarn_log_multiplier.
  EXPECT_FLOAT_EQ(rope_frequencies(*c, 1).attention_scaling,
                  static_cast<float>((0.1 * std::log(4.0) + 1) / (0.05 * std::log(4.0) + 1)));
  qwen2.kv.emplace_back("qwen2.rope.scaling.yarn_attn_factor", 0.9f);
  c = config_of(qwen2);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FLOAT_EQ(rope_frequencies(*c, 1).attention_scaling, 0.9f);
  GgufSpec bad = gguf_spec("qwen2");
  bad.kv.emplace_back("qwen2.rope.scaling.type", std::string("yarn"));
  bad.kv.emplace_back("qwen2.rope.scaling.yarn_beta_slow", -1.0f);
  EXPECT_NE(gguf_error(bad).find("yarn_beta_fast/slow must be positive"), std::string::npos);
  GgufSpec other = gguf_spec("qwen2");
  other.kv.emplace_back("qwen2.rope.scaling.type", std::string("longrope"));
  EXPECT_NE(gguf_error(other).find("(supported: none, linear, yarn; longrope for phi3)"),
            std::string::npos);
}

TEST(ModelConfigGguf, Phi3TwinsRotateAsTheirHfFolders) {
  for (const char* variant : {"phi3", "phi3_longrope", "phi3_partial_rotary"}) {
    SCOPED_TRACE(variant);
    const ModelConfig gguf = twin_config(variant), hf = hf_config(variant);
    EXPECT_EQ(gguf.architecture, Architecture::kPhi3);
    EXPECT_TRUE(gguf.fused_projections);
    EXPECT_EQ(gguf.rotary_dims(), hf.rotary_dims());
    EXPECT_EQ(gguf.layer_sliding_windows, hf.layer_sliding_windows);
    EXPECT_EQ(gguf.rope.type, hf.rope.type);
    EXPECT_EQ(gguf.rope.original_max_position_embeddings, hf.rope.original_max_position_embeddings);
    // Short factors up to the trained length, long ones past it, the same attention factor.
    for (int64_t length : {int64_t{1}, int64_t{16}, int64_t{17}, int64_t{200}}) {
      const RopeFrequencies a = rope_frequencies(gguf, length), b = rope_frequencies(hf, length);
      EXPECT_EQ(a.inv_freq, b.inv_freq) << length;
      EXPECT_FLOAT_EQ(a.attention_scaling, b.attention_scaling) << length;
    }
  }
  EXPECT_EQ(twin_config("phi3_partial_rotary").rotary_dim, 12);  // rope.dimension_count of 16
  EXPECT_EQ(twin_config("phi3").sliding_window_of(1), 16);
  EXPECT_EQ(twin_config("phi3_longrope").rope.type, RopeType::kLongRope);
}

TEST(ModelConfigGguf, YarnTwinRotatesAsItsHfFolder) {
  const ModelConfig gguf = twin_config("qwen2_yarn"), hf = hf_config("qwen2_yarn");
  EXPECT_EQ(gguf.rope.type, RopeType::kYarn);
  EXPECT_EQ(gguf.rope.factor, 4.0);
  EXPECT_EQ(gguf.rope.original_max_position_embeddings, 32);
  const RopeFrequencies a = rope_frequencies(gguf, 1), b = rope_frequencies(hf, 1);
  EXPECT_EQ(a.inv_freq, b.inv_freq);
  EXPECT_EQ(a.attention_scaling, b.attention_scaling);
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
