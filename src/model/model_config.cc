#include "model/model_config.h"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/text_file.h"
#include "loader/gguf_file.h"

namespace lm {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxDim = 1 << 17;

// Typed field access that turns wrong JSON types into errors naming the file and key.
class Fields {
 public:
  Fields(const Json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}

  Result<std::optional<int64_t>> opt_int(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return std::optional<int64_t>();
    if (!it->is_number_integer()) return wrong(key, "an integer", *it);
    return std::optional<int64_t>(it->get<int64_t>());
  }
  // transformers' dataclass defaults: a key the file leaves out takes `fallback`; an explicit
  // null stays "none".
  Result<std::optional<int64_t>> int_unless_null(const char* key, int64_t fallback) const {
    if (j_.find(key) == j_.end()) return std::optional<int64_t>(fallback);
    return opt_int(key);
  }
  Result<std::optional<double>> number_unless_null(const char* key, double fallback) const {
    auto it = j_.find(key);
    if (it == j_.end()) return std::optional<double>(fallback);
    if (it->is_null()) return std::optional<double>();
    if (!it->is_number()) return wrong(key, "a number", *it);
    return std::optional<double>(it->get<double>());
  }
  Result<int64_t> int_or(const char* key, int64_t fallback) const {
    LM_ASSIGN_OR_RETURN(auto v, opt_int(key));
    return v.value_or(fallback);
  }
  Result<int64_t> required_int(const char* key) const {
    LM_ASSIGN_OR_RETURN(auto v, opt_int(key));
    if (!v) return Error{origin_ + ": missing required field '" + key + "'"};
    return *v;
  }
  Result<double> number_or(const char* key, double fallback) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return fallback;
    if (!it->is_number()) return wrong(key, "a number", *it);
    return it->get<double>();
  }
  Result<bool> bool_or(const char* key, bool fallback) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) return wrong(key, "a boolean", *it);
    return it->get<bool>();
  }
  Result<std::optional<std::string>> opt_string(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return std::optional<std::string>();
    if (!it->is_string()) return wrong(key, "a string", *it);
    return std::optional<std::string>(it->get<std::string>());
  }
  // An id or a list of ids (eos_token_id may be either).
  Result<std::vector<int32_t>> id_list(const char* key) const {
    std::vector<int32_t> ids;
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return ids;
    auto push = [&](const Json& v) -> Status {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
        return wrong(key, "a token id or a list of token ids", *it);
      }
      ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
      return {};
    };
    if (it->is_array()) {
      for (const auto& v : *it) LM_RETURN_IF_ERROR(push(v));
    } else {
      LM_RETURN_IF_ERROR(push(*it));
    }
    return ids;
  }

  Error wrong(const char* key, const char* expected, const Json& got) const {
    return Error{origin_ + ": field '" + key + "' should be " + expected + ", got " +
                 got.type_name() + " " + got.dump().substr(0, 40)};
  }

 private:
  const Json& j_;
  std::string origin_;
};

Status check_range(const std::string& origin, const char* name, int64_t value, int64_t lo,
                   int64_t hi) {
  if (value < lo || value > hi) {
    return Error{origin + ": " + name + " = " + std::to_string(value) + " is outside [" +
                 std::to_string(lo) + ", " + std::to_string(hi) + "]"};
  }
  return {};
}

// Checks the relations between dimensions shared by both config sources.
Status validate(const ModelConfig& c, const std::string& origin) {
  LM_RETURN_IF_ERROR(check_range(origin, "vocab_size", c.vocab_size, 1, 1 << 22));
  LM_RETURN_IF_ERROR(check_range(origin, "hidden_size", c.hidden_size, 1, kMaxDim));
  LM_RETURN_IF_ERROR(check_range(origin, "intermediate_size", c.intermediate_size, 1, 4 * kMaxDim));
  LM_RETURN_IF_ERROR(check_range(origin, "num_hidden_layers", c.num_hidden_layers, 1, 1024));
  LM_RETURN_IF_ERROR(check_range(origin, "num_attention_heads", c.num_attention_heads, 1, 1024));
  LM_RETURN_IF_ERROR(
      check_range(origin, "num_key_value_heads", c.num_key_value_heads, 1, c.num_attention_heads));
  LM_RETURN_IF_ERROR(check_range(origin, "head_dim", c.head_dim, 2, 1024));
  LM_RETURN_IF_ERROR(
      check_range(origin, "max_position_embeddings", c.max_position_embeddings, 1, 1 << 24));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return Error{origin + ": num_attention_heads (" + std::to_string(c.num_attention_heads) +
                 ") is not a multiple of num_key_value_heads (" +
                 std::to_string(c.num_key_value_heads) + ")"};
  }
  if (c.head_dim % 2 != 0) return Error{origin + ": head_dim must be even for rotary embeddings"};
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1))
    return Error{origin + ": rms_norm_eps must be in (0, 1)"};
  if (!(c.rope.theta > 0)) return Error{origin + ": rope_theta must be positive"};
  if (!(c.rope.factor > 0)) return Error{origin + ": rope scaling factor must be positive"};
  if (c.rope.type == RopeType::kLlama3 && (c.rope.original_max_position_embeddings <= 0 ||
                                           !(c.rope.high_freq_factor > c.rope.low_freq_factor))) {
    return Error{origin +
                 ": llama3 rope scaling needs original_max_position_embeddings > 0 and "
                 "high_freq_factor > low_freq_factor"};
  }
  if (c.moe.num_experts > 0) {
    LM_RETURN_IF_ERROR(check_range(origin, "num_experts", c.moe.num_experts, 1, 1024));
    LM_RETURN_IF_ERROR(check_range(origin, "num_experts_per_tok", c.moe.num_experts_per_tok, 1,
                                   c.moe.num_experts));
    LM_RETURN_IF_ERROR(check_range(origin, "moe_intermediate_size", c.moe.expert_intermediate_size,
                                   1, 4 * kMaxDim));
    LM_RETURN_IF_ERROR(check_range(origin, "shared_expert_intermediate_size",
                                   c.moe.shared_expert_intermediate_size, 0, 4 * kMaxDim));
  }
  for (int32_t id : c.eos_token_ids) {
    if (id >= c.vocab_size)
      return Error{origin + ": eos_token_id " + std::to_string(id) + " is outside the vocabulary"};
  }
  return {};
}

// YaRN's own keys with transformers' defaults (_compute_yarn_parameters): factor is required
// (null: derived from the context lengths), beta_fast / beta_slow 32 / 1 when missing, null or 0,
// truncate true, attention_factor else from mscale / mscale_all_dim when both are set.
Status parse_yarn(const Json& rope, const Fields& f, const std::string& origin, RopeConfig* out) {
  if (rope.find("factor") == rope.end())
    return Error{origin + ": yarn rope scaling needs a 'factor'"};
  if (rope["factor"].is_null()) out->factor = 0;  // derived by finish_yarn
  LM_ASSIGN_OR_RETURN(out->beta_fast, f.number_or("beta_fast", 0));
  LM_ASSIGN_OR_RETURN(out->beta_slow, f.number_or("beta_slow", 0));
  if (out->beta_fast == 0) out->beta_fast = 32;
  if (out->beta_slow == 0) out->beta_slow = 1;
  LM_ASSIGN_OR_RETURN(out->mscale, f.number_or("mscale", 0));
  LM_ASSIGN_OR_RETURN(out->mscale_all_dim, f.number_or("mscale_all_dim", 0));
  LM_ASSIGN_OR_RETURN(out->truncate, f.bool_or("truncate", true));
  if (auto it = rope.find("attention_factor"); it != rope.end() && !it->is_null()) {
    LM_ASSIGN_OR_RETURN(double a, f.number_or("attention_factor", 1.0));
    out->attention_factor = a;
  }
  if (!(out->beta_fast > 0 && out->beta_slow > 0))
    return Error{origin + ": yarn beta_fast and beta_slow must be positive"};
  return {};
}

Status parse_rope_scaling(const Json& rope, const std::string& origin, RopeConfig* out) {
  if (!rope.is_object()) return Error{origin + ": rope_scaling should be an object or null"};
  Fields f(rope, origin);
  LM_ASSIGN_OR_RETURN(auto type, f.opt_string("rope_type"));
  if (!type) {
    LM_ASSIGN_OR_RETURN(type, f.opt_string("type"));
  }
  const std::string t = type.value_or("default");
  if (t == "default") {
    out->type = RopeType::kDefault;
  } else if (t == "linear") {
    out->type = RopeType::kLinear;
  } else if (t == "dynamic") {
    out->type = RopeType::kDynamic;
  } else if (t == "llama3") {
    out->type = RopeType::kLlama3;
  } else if (t == "longrope" || t == "su") {
    out->type = RopeType::kLongRope;
  } else if (t == "yarn") {
    out->type = RopeType::kYarn;
  } else {
    return Error{origin + ": unsupported rope scaling type '" + t +
                 "' (supported: linear, dynamic, llama3, longrope, yarn)"};
  }
  LM_ASSIGN_OR_RETURN(out->theta, f.number_or("rope_theta", out->theta));
  LM_ASSIGN_OR_RETURN(out->factor, f.number_or("factor", 1.0));
  LM_ASSIGN_OR_RETURN(out->low_freq_factor, f.number_or("low_freq_factor", 1.0));
  LM_ASSIGN_OR_RETURN(out->high_freq_factor, f.number_or("high_freq_factor", 4.0));
  LM_ASSIGN_OR_RETURN(out->original_max_position_embeddings,
                      f.int_or("original_max_position_embeddings", 0));
  if (out->type == RopeType::kLongRope) {
    const auto factors = [&](const char* key, std::vector<double>* to) -> Status {
      auto it = rope.find(key);
      if (it == rope.end() || !it->is_array())
        return Error{origin + ": longrope scaling needs a '" + key + "' list"};
      for (const Json& v : *it) {
        if (!v.is_number() || !(v.get<double>() > 0))
          return f.wrong(key, "a list of positive numbers", *it);
        to->push_back(v.get<double>());
      }
      return {};
    };
    LM_RETURN_IF_ERROR(factors("short_factor", &out->short_factor));
    LM_RETURN_IF_ERROR(factors("long_factor", &out->long_factor));
    if (auto it = rope.find("attention_factor"); it != rope.end() && !it->is_null()) {
      LM_ASSIGN_OR_RETURN(double a, f.number_or("attention_factor", 1.0));
      out->attention_factor = a;
    }
    if (rope.find("factor") == rope.end()) out->factor = 0;  // derived from the context lengths
  }
  if (out->type == RopeType::kYarn) LM_RETURN_IF_ERROR(parse_yarn(rope, f, origin, out));
  return {};
}

// Layer i is local (sliding) unless it is the last of each group of `every`: transformers'
// sliding_window_pattern ((i + 1) % every != 0) and llama.cpp's (i % every < every - 1) agree.
bool local_in_pattern(int64_t layer, int64_t every) { return (layer + 1) % every != 0; }

// Gives each layer the window when `sliding(layer)` says it has one (all 0 without a window).
void set_layer_windows(ModelConfig& c, std::optional<int64_t> window,
                       const std::function<bool(int64_t)>& sliding) {
  c.layer_sliding_windows.assign(static_cast<size_t>(c.num_hidden_layers), 0);
  for (int64_t i = 0; window && i < c.num_hidden_layers; ++i)
    if (sliding(i)) c.layer_sliding_windows[static_cast<size_t>(i)] = *window;
}

// Which layers attend through a sliding window, as transformers' configs decide: an explicit
// `layer_types` list wins; otherwise `default_sliding(layer)` (the architecture's rule). A layer
// is windowed only when the config has a window.
Status parse_layer_windows(const Json& j, const Fields& f, const std::string& origin,
                           std::optional<int64_t> window,
                           const std::function<bool(int64_t)>& default_sliding, ModelConfig& c,
                           bool reads_layer_types = true) {
  if (c.num_hidden_layers < 1 || c.num_hidden_layers > 1024) return {};  // validate() says why
  if (window && (*window < 1 || *window > (int64_t{1} << 24)))
    return Error{origin + ": sliding_window = " + std::to_string(*window) + " is not positive"};
  std::vector<bool> sliding(static_cast<size_t>(c.num_hidden_layers), false);
  if (auto it = j.find("layer_types"); reads_layer_types && it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != sliding.size())
      return f.wrong("layer_types", "a list with one entry per layer", *it);
    for (size_t i = 0; i < sliding.size(); ++i) {
      const Json& t = (*it)[i];
      if (t == "sliding_attention") {
        sliding[i] = true;
      } else if (t != "full_attention") {
        return f.wrong("layer_types", "'full_attention' or 'sliding_attention' entries", t);
      }
    }
  } else {
    for (size_t i = 0; i < sliding.size(); ++i)
      sliding[i] = default_sliding(static_cast<int64_t>(i));
  }
  set_layer_windows(c, window, [&](int64_t i) { return sliding[static_cast<size_t>(i)]; });
  return {};
}

// The MLP's activation against what the architecture computes: SwiGLU for the Llama family
// (hidden_act), GeGLU with the tanh GELU for Gemma (Gemma 1: hidden_act, whose legacy "gelu"
// transformers reads as the tanh one; Gemma 2/3: hidden_activation).
Status parse_activation(const Fields& f, const std::string& origin, ModelConfig& c) {
  const bool gemma = c.gemma_scaling;
  const bool gemma1 = c.architecture == Architecture::kGemma;
  LM_ASSIGN_OR_RETURN(auto act,
                      f.opt_string(gemma && !gemma1 ? "hidden_activation" : "hidden_act"));
  std::string a = act.value_or(gemma ? "gelu_pytorch_tanh" : "silu");
  if (gemma1 && a == "gelu") a = "gelu_pytorch_tanh";
  if (!gemma && (a == "silu" || a == "swish")) {
    c.mlp_activation = MlpActivation::kSilu;
  } else if (gemma && (a == "gelu_pytorch_tanh" || a == "gelu_new")) {
    c.mlp_activation = MlpActivation::kGeluTanh;
  } else {
    return Error{origin + ": hidden activation '" + a + "' is not supported for " +
                 c.architecture_name + " (supported: " + (gemma ? "gelu_pytorch_tanh" : "silu") +
                 ")"};
  }
  return {};
}

// Gemma 1/2/3 (text): sqrt(hidden) embedding scale, (1 + w) norms, GeGLU; 2 and 3 add the
// sandwich norms, query_pre_attn_scalar and alternating sliding-window layers; 2 soft-caps the
// logits; 3 norms q/k and gives its local layers their own RoPE base.
Status parse_gemma(const Json& j, const Fields& f, const std::string& origin, ModelConfig& c) {
  c.gemma_scaling = true;
  LM_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.bool_or("tie_word_embeddings", true));
  LM_ASSIGN_OR_RETURN(bool attention_bias, f.bool_or("attention_bias", false));
  if (attention_bias) return Error{origin + ": attention_bias on Gemma is not supported"};
  LM_ASSIGN_OR_RETURN(bool bidirectional, f.bool_or("use_bidirectional_attention", false));
  if (bidirectional) {
    return Error{origin + ": use_bidirectional_attention (an embedding model) is not supported"};
  }
  if (c.architecture == Architecture::kGemma) {
    return parse_layer_windows(
        j, f, origin, std::nullopt, [](int64_t) { return false; }, c);
  }
  c.sandwich_norms = true;
  // Missing keys take transformers' Gemma2Config / Gemma3TextConfig defaults.
  const bool gemma2 = c.architecture == Architecture::kGemma2;
  LM_ASSIGN_OR_RETURN(auto scalar, f.number_unless_null("query_pre_attn_scalar", 256.0));
  if (scalar) {
    if (!(*scalar > 0)) return Error{origin + ": query_pre_attn_scalar must be positive"};
    c.query_pre_attn_scalar = *scalar;
  }
  LM_ASSIGN_OR_RETURN(auto final_cap,
                      f.number_unless_null("final_logit_softcapping", gemma2 ? 30.0 : 0.0));
  LM_ASSIGN_OR_RETURN(auto attn_cap,
                      f.number_unless_null("attn_logit_softcapping", gemma2 ? 50.0 : 0.0));
  c.final_logit_softcapping = final_cap.value_or(0.0);
  c.attn_logit_softcapping = attn_cap.value_or(0.0);
  if (c.final_logit_softcapping < 0 || c.attn_logit_softcapping < 0)
    return Error{origin + ": logit soft-capping values must not be negative"};
  LM_ASSIGN_OR_RETURN(auto window, f.int_unless_null("sliding_window", 4096));
  if (c.architecture == Architecture::kGemma2) {
    // Even layers are local (sliding), odd ones global.
    return parse_layer_windows(
        j, f, origin, window, [](int64_t i) { return local_in_pattern(i, 2); }, c);
  }
  c.qk_norm = true;
  if (j.find("rope_theta") == j.end()) c.rope.theta = 1000000.0;  // Gemma 3's global default
  LM_ASSIGN_OR_RETURN(int64_t pattern, f.int_or("sliding_window_pattern", 6));
  if (pattern < 1) return Error{origin + ": sliding_window_pattern must be positive"};
  LM_RETURN_IF_ERROR(parse_layer_windows(
      j, f, origin, window, [pattern](int64_t i) { return local_in_pattern(i, pattern); }, c));
  // Local layers: default RoPE at rope_local_base_freq; global ones: rope_theta + rope_scaling.
  RopeConfig local;
  LM_ASSIGN_OR_RETURN(local.theta, f.number_or("rope_local_base_freq", 10000.0));
  if (auto p = j.find("rope_parameters"); p != j.end() && p->is_object()) {
    // transformers 5: one set of parameters per layer type.
    if (auto s = p->find("sliding_attention"); s != p->end())
      LM_RETURN_IF_ERROR(parse_rope_scaling(*s, origin, &local));
    if (auto g = p->find("full_attention"); g != p->end()) {
      c.rope = RopeConfig{};
      LM_RETURN_IF_ERROR(parse_rope_scaling(*g, origin, &c.rope));
    }
  }
  c.local_rope = local;
  return {};
}

// LongRoPE's context lengths (Phi-3 keeps original_max_position_embeddings beside rope_scaling)
// and, as transformers derives it when absent, factor = max / original length.
Status finish_longrope(const Fields& f, const std::string& origin, ModelConfig& c) {
  if (c.rope.type != RopeType::kLongRope) return {};
  if (c.architecture == Architecture::kPhi3) {
    // Phi3Config's own field (default 4096) wins over one inside rope_scaling, as in transformers.
    LM_ASSIGN_OR_RETURN(auto top, f.opt_int("original_max_position_embeddings"));
    if (top) {
      c.rope.original_max_position_embeddings = *top;
    } else if (c.rope.original_max_position_embeddings == 0) {
      c.rope.original_max_position_embeddings = 4096;
    }
  }
  if (c.rope.original_max_position_embeddings == 0) {
    LM_ASSIGN_OR_RETURN(c.rope.original_max_position_embeddings,
                        f.int_or("original_max_position_embeddings", c.max_position_embeddings));
  }
  if (c.rope.original_max_position_embeddings <= 0)
    return Error{origin + ": longrope needs original_max_position_embeddings > 0"};
  if (c.rope.factor == 0) {
    c.rope.factor = static_cast<double>(c.max_position_embeddings) /
                    static_cast<double>(c.rope.original_max_position_embeddings);
  }
  const auto half = static_cast<size_t>(c.rotary_dims() / 2);
  if (c.rope.short_factor.size() != half || c.rope.long_factor.size() != half) {
    return Error{origin + ": longrope short_factor/long_factor need rotary dims / 2 = " +
                 std::to_string(half) + " entries"};
  }
  return {};
}

// YaRN's trained length as transformers' standardize_rope_params settles it: a top-level
// original_max_position_embeddings wins, then the rope parameters' own, then
// max_position_embeddings; a null factor is max / original length.
Status finish_yarn(const Fields& f, const std::string& origin, ModelConfig& c) {
  if (c.rope.type != RopeType::kYarn) return {};
  LM_ASSIGN_OR_RETURN(auto top, f.opt_int("original_max_position_embeddings"));
  if (top) {
    c.rope.original_max_position_embeddings = *top;
  } else if (c.rope.original_max_position_embeddings == 0) {
    c.rope.original_max_position_embeddings = c.max_position_embeddings;
  }
  if (c.rope.original_max_position_embeddings <= 0)
    return Error{origin + ": yarn needs original_max_position_embeddings > 0"};
  if (c.rope.factor == 0) {
    c.rope.factor = static_cast<double>(c.max_position_embeddings) /
                    static_cast<double>(c.rope.original_max_position_embeddings);
  }
  return {};
}

// Phi-3/3.5/4-mini: fused qkv and gate_up projections, LongRoPE from
// original_max_position_embeddings, a sliding window over every layer when the config has one.
Status parse_phi3(const Json& j, const Fields& f, const std::string& origin,
                  std::optional<int64_t> window, ModelConfig& c) {
  c.fused_projections = true;
  LM_ASSIGN_OR_RETURN(double partial, f.number_or("partial_rotary_factor", 1.0));
  if (auto p = j.find("rope_parameters"); p != j.end() && p->is_object()) {
    LM_ASSIGN_OR_RETURN(partial, Fields(*p, origin).number_or("partial_rotary_factor", partial));
  }
  if (partial != 1.0) {
    // As transformers: int(head_dim * partial_rotary_factor) leading elements rotate.
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
    if (!(partial > 0 && partial < 1) || c.rotary_dim < 2 || c.rotary_dim % 2 != 0) {
      return Error{origin + ": partial_rotary_factor " + std::to_string(partial) +
                   " does not give an even number of rotary dimensions of head_dim " +
                   std::to_string(c.head_dim)};
    }
  }
  LM_ASSIGN_OR_RETURN(bool attention_bias, f.bool_or("attention_bias", false));
  if (attention_bias) return Error{origin + ": attention_bias on Phi3 is not supported"};
  return parse_layer_windows(
      j, f, origin, window, [](int64_t) { return true; }, c,
      /*reads_layer_types=*/false);
}

// Qwen2-MoE / Qwen3-MoE attention: Qwen2-MoE's q/k/v biases (qkv_bias, default on) and its
// window on the even-numbered layers below max_window_layers; Qwen3-MoE's q/k norms and its window
// on every layer; both only with use_sliding_window.
Status parse_qwen_moe_attention(const Json& j, const Fields& f, const std::string& origin,
                                std::optional<int64_t> window, ModelConfig& c) {
  const bool qwen2 = c.architecture == Architecture::kQwen2Moe;
  if (qwen2) {
    LM_ASSIGN_OR_RETURN(c.attention_bias, f.bool_or("qkv_bias", true));
  } else {
    c.qk_norm = true;
    LM_ASSIGN_OR_RETURN(bool attention_bias, f.bool_or("attention_bias", false));
    if (attention_bias) return Error{origin + ": attention_bias on Qwen3-MoE is not supported"};
  }
  LM_ASSIGN_OR_RETURN(bool use_sliding, f.bool_or("use_sliding_window", false));
  LM_ASSIGN_OR_RETURN(int64_t max_window_layers, f.int_or("max_window_layers", 28));
  return parse_layer_windows(
      j, f, origin, use_sliding ? window : std::nullopt,
      [&](int64_t i) { return !qwen2 || ((i + 1) % 2 != 0 && i < max_window_layers); }, c,
      /*reads_layer_types=*/qwen2);
}

// The sparse MoE block of Mixtral (num_local_experts, every layer, the experts as wide as
// intermediate_size, top-k weights always renormalized) and Qwen2/3-MoE (num_experts,
// moe_intermediate_size, norm_topk_prob, decoder_sparse_step and mlp_only_layers leaving some
// layers dense; Qwen2-MoE's shared expert), with transformers' defaults for missing keys.
Status parse_moe(const Json& j, const Fields& f, const std::string& origin, ModelConfig& c) {
  MoeConfig& m = c.moe;
  const bool mixtral = c.architecture == Architecture::kMixtral;
  const bool qwen2 = c.architecture == Architecture::kQwen2Moe;
  LM_ASSIGN_OR_RETURN(m.num_experts, mixtral ? f.int_or("num_local_experts", 8)
                                             : f.int_or("num_experts", qwen2 ? 60 : 128));
  LM_ASSIGN_OR_RETURN(m.num_experts_per_tok, f.int_or("num_experts_per_tok", mixtral ? 2
                                                                             : qwen2 ? 4
                                                                                     : 8));
  if (m.num_experts < 1) return Error{origin + ": a MoE model needs num_experts >= 1"};
  if (mixtral) {
    m.expert_intermediate_size = c.intermediate_size;
    m.norm_topk_prob = true;
  } else {
    LM_ASSIGN_OR_RETURN(m.expert_intermediate_size,
                        f.int_or("moe_intermediate_size", qwen2 ? 1408 : 768));
    LM_ASSIGN_OR_RETURN(m.norm_topk_prob, f.bool_or("norm_topk_prob", false));
    if (qwen2) {
      LM_ASSIGN_OR_RETURN(m.shared_expert_intermediate_size,
                          f.int_or("shared_expert_intermediate_size", 5632));
    }
  }
  int64_t sparse_step = 1;
  if (!mixtral) {
    LM_ASSIGN_OR_RETURN(sparse_step, f.int_or("decoder_sparse_step", 1));
  }
  if (sparse_step < 1) return Error{origin + ": decoder_sparse_step must be positive"};
  if (c.num_hidden_layers < 1 || c.num_hidden_layers > 1024) return {};  // validate() says why
  m.sparse_layers.assign(static_cast<size_t>(c.num_hidden_layers), false);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    m.sparse_layers[static_cast<size_t>(i)] = (i + 1) % sparse_step == 0;
  if (auto it = j.find("mlp_only_layers"); !mixtral && it != j.end() && !it->is_null()) {
    if (!it->is_array()) return f.wrong("mlp_only_layers", "a list of layer indices", *it);
    for (const Json& v : *it) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.num_hidden_layers)
        return f.wrong("mlp_only_layers", "a list of layer indices", *it);
      m.sparse_layers[static_cast<size_t>(v.get<int64_t>())] = false;
    }
  }
  return {};
}

// A per-layer bool array under `key` (empty when the key is absent or not an array), one entry per
// layer.
Result<std::vector<bool>> layer_flags(const GgufFile& gguf, const std::string& key,
                                      const ModelConfig& c) {
  std::vector<bool> flags;
  const GgufValue* v = gguf.find(key);
  const auto* items = v == nullptr ? nullptr : std::get_if<std::vector<GgufValue>>(&v->value);
  if (items == nullptr) return flags;
  for (const GgufValue& item : *items) {
    const auto* b = std::get_if<bool>(&item.value);
    if (b == nullptr) return Error{gguf.path() + ": " + key + " should be a list of booleans"};
    flags.push_back(*b);
  }
  if (static_cast<int64_t>(flags.size()) != c.num_hidden_layers) {
    return Error{gguf.path() + ": " + key + " has " + std::to_string(flags.size()) +
                 " entries for " + std::to_string(c.num_hidden_layers) + " layers"};
  }
  return flags;
}

// Gemma 2/3 from GGUF, as llama.cpp reads them (src/models/gemma2.cpp, gemma3.cpp): soft-caps and
// the window from their keys (Gemma 2: defaults 50 / 30 / 4096), local layers every other one
// (Gemma 2) or five of six (Gemma 3) unless attention.sliding_window_pattern says otherwise (a
// group size, or as newer converters write it one bool per layer, true where it slides), the
// local layers' RoPE base from rope.freq_base_swa (Gemma 3: 10000 and no scaling; Gemma 2: the
// global one), and scores scaled by 1/sqrt(head_dim), or 1/sqrt(hidden / heads) for the 27B
// models (46 / 62 layers), as llama.cpp does: GGUF has no query_pre_attn_scalar.
Status gemma_from_gguf(const GgufFile& gguf, const std::string& p, ModelConfig& c) {
  const bool gemma2 = c.architecture == Architecture::kGemma2;
  LM_ASSIGN_OR_RETURN(auto attn_cap, gguf.get_float(p + "attn_logit_softcapping"));
  LM_ASSIGN_OR_RETURN(auto final_cap, gguf.get_float(p + "final_logit_softcapping"));
  c.attn_logit_softcapping = gemma2 ? attn_cap.value_or(50.0) : 0.0;
  c.final_logit_softcapping = final_cap.value_or(gemma2 ? 30.0 : 0.0);
  LM_ASSIGN_OR_RETURN(auto window, gguf.get_int(p + "attention.sliding_window"));
  if (gemma2 && !window) window = 4096;
  const std::string pattern_key = p + "attention.sliding_window_pattern";
  LM_ASSIGN_OR_RETURN(const std::vector<bool> per_layer, layer_flags(gguf, pattern_key, c));
  int64_t every = gemma2 ? 2 : 6;
  if (per_layer.empty()) {
    LM_ASSIGN_OR_RETURN(auto pattern, gguf.get_int(pattern_key));
    every = pattern.value_or(every);
  }
  if (every < 1) return Error{gguf.path() + ": " + pattern_key + " must be positive"};
  if (c.num_hidden_layers >= 1 && c.num_hidden_layers <= 1024) {  // else validate() says why
    set_layer_windows(c, window && *window > 0 ? window : std::nullopt, [&](int64_t i) {
      return per_layer.empty() ? local_in_pattern(i, every) : per_layer[static_cast<size_t>(i)];
    });
  }
  LM_ASSIGN_OR_RETURN(auto local_base, gguf.get_float(p + "rope.freq_base_swa"));
  RopeConfig local = gemma2 ? c.rope : RopeConfig{};
  local.theta = local_base.value_or(gemma2 ? c.rope.theta : 10000.0);
  c.local_rope = local;
  const bool is_27b = c.num_hidden_layers == (gemma2 ? 46 : 62);
  c.query_pre_attn_scalar =
      static_cast<double>(is_27b ? c.hidden_size / c.num_attention_heads : c.head_dim);
  return {};
}

// Experts from GGUF as llama.cpp reads them: <arch>.expert_count and expert_used_count (Mixtral
// is a "llama" with experts), every layer sparse; the experts as wide as feed_forward_length
// ("llama") or expert_feed_forward_length (Qwen); top-k weights renormalized for llama and
// qwen3moe, not for qwen2moe (llama.cpp's fixed choice per architecture, which matches the released
// Mixtral, Qwen1.5/2-MoE and Qwen3-MoE configs); Qwen2-MoE's shared expert from
// expert_shared_feed_forward_length.
Status moe_from_gguf(const GgufFile& gguf, const std::string& p, ModelConfig& c) {
  LM_ASSIGN_OR_RETURN(auto experts, gguf.get_int(p + "expert_count"));
  const bool qwen_moe =
      c.architecture == Architecture::kQwen2Moe || c.architecture == Architecture::kQwen3Moe;
  if (!experts || *experts == 0) {
    if (qwen_moe) return Error{gguf.path() + ": " + p + "expert_count is missing"};
    return {};
  }
  if (c.architecture == Architecture::kLlama) {
    c.architecture = Architecture::kMixtral;
  } else if (!qwen_moe) {
    return Error{gguf.path() + ": experts in a '" + c.architecture_name +
                 "' model are not supported"};
  }
  MoeConfig& m = c.moe;
  m.num_experts = *experts;
  LM_ASSIGN_OR_RETURN(auto used, gguf.get_int(p + "expert_used_count"));
  if (!used) return Error{gguf.path() + ": " + p + "expert_used_count is missing"};
  m.num_experts_per_tok = *used;
  m.expert_intermediate_size = c.intermediate_size;
  if (qwen_moe) {
    LM_ASSIGN_OR_RETURN(auto width, gguf.get_int(p + "expert_feed_forward_length"));
    // Without the key llama.cpp splits feed_forward_length among the used experts.
    m.expert_intermediate_size = width.value_or(c.intermediate_size / std::max<int64_t>(1, *used));
  }
  m.norm_topk_prob = c.architecture != Architecture::kQwen2Moe;
  if (c.architecture == Architecture::kQwen2Moe) {
    LM_ASSIGN_OR_RETURN(auto shared, gguf.get_int(p + "expert_shared_feed_forward_length"));
    m.shared_expert_intermediate_size = shared.value_or(c.intermediate_size);
  }
  if (c.num_hidden_layers >= 1 && c.num_hidden_layers <= 1024)  // else validate() says why
    m.sparse_layers.assign(static_cast<size_t>(c.num_hidden_layers), true);
  return {};
}

// Phi-3 from GGUF as llama.cpp's converter (Phi3MiniModel) writes it: attn_qkv / ffn_up fused as
// in the HF checkpoint, rope.dimension_count for partial rotary (read by the caller), the window
// on every layer (0: none), and LongRoPE as the rope_factors_long / rope_factors_short tensors
// with rope.scaling.attn_factor and rope.scaling.original_context_length.
// NOTE llama.cpp picks the long or short factors once, by the context size it was started with,
// and currently ignores Phi-3's window; we keep transformers' rules (the reference): the window
// applies, and the long factors serve a forward that reaches past the trained length, per
// sequence, as for the HF folder.
Status phi3_from_gguf(const GgufFile& gguf, const std::string& p,
                      const std::optional<std::string>& scaling, ModelConfig& c) {
  c.fused_projections = true;
  LM_ASSIGN_OR_RETURN(auto window, gguf.get_int(p + "attention.sliding_window"));
  if (c.num_hidden_layers >= 1 && c.num_hidden_layers <= 1024) {  // else validate() says why
    set_layer_windows(c, window && *window > 0 ? window : std::nullopt,
                      [](int64_t) { return true; });
  }
  const GgufTensorInfo* long_factors = gguf.find_tensor("rope_factors_long.weight");
  const GgufTensorInfo* short_factors = gguf.find_tensor("rope_factors_short.weight");
  if (long_factors == nullptr && short_factors == nullptr) {
    if (scaling == "longrope")
      return Error{gguf.path() + ": longrope needs the rope_factors_long/short.weight tensors"};
    return {};
  }
  const auto half = static_cast<int64_t>(c.rotary_dims() / 2);
  const auto read = [&](const GgufTensorInfo* info, const char* name,
                        std::vector<double>* to) -> Status {
    if (info == nullptr || info->dtype != DType::kF32 || info->shape != Shape{half}) {
      return Error{gguf.path() + ": tensor '" + name + "' is missing or not F32 [" +
                   std::to_string(half) + "] (rotary dims / 2)"};
    }
    const Tensor t = gguf.tensor(*info);
    const auto* values = static_cast<const float*>(t.data);
    to->assign(values, values + half);
    return {};
  };
  c.rope.type = RopeType::kLongRope;
  LM_RETURN_IF_ERROR(read(long_factors, "rope_factors_long.weight", &c.rope.long_factor));
  LM_RETURN_IF_ERROR(read(short_factors, "rope_factors_short.weight", &c.rope.short_factor));
  // llama.cpp's defaults: the trained length is context_length, the attention factor 1 (the
  // converter writes both).
  LM_ASSIGN_OR_RETURN(auto original, gguf.get_int(p + "rope.scaling.original_context_length"));
  c.rope.original_max_position_embeddings = original.value_or(c.max_position_embeddings);
  if (c.rope.original_max_position_embeddings <= 0)
    return Error{gguf.path() + ": rope.scaling.original_context_length must be positive"};
  LM_ASSIGN_OR_RETURN(auto attn_factor, gguf.get_float(p + "rope.scaling.attn_factor"));
  c.rope.attention_factor = attn_factor.value_or(1.0);
  c.rope.factor = static_cast<double>(c.max_position_embeddings) /
                  static_cast<double>(c.rope.original_max_position_embeddings);
  return {};
}

// YaRN from GGUF as the converter writes it (rope.scaling.factor, .original_context_length, and
// HF's beta_fast / beta_slow / attention_factor as yarn_beta_fast / yarn_beta_slow /
// yarn_attn_factor when the config has them), with llama.cpp's defaults (factor 1, trained
// length context_length, betas 32 / 1). yarn_log_multiplier is llama.cpp's mscale_all_dim with
// mscale 1. yarn_ext_factor is not read: transformers has no such parameter (it ignores an HF
// config's extrapolation_factor, which the converter copies there).
Status yarn_from_gguf(const GgufFile& gguf, const std::string& p, ModelConfig& c) {
  c.rope.type = RopeType::kYarn;
  LM_ASSIGN_OR_RETURN(auto factor, gguf.get_float(p + "rope.scaling.factor"));
  c.rope.factor = factor.value_or(1.0);
  LM_ASSIGN_OR_RETURN(auto original, gguf.get_int(p + "rope.scaling.original_context_length"));
  c.rope.original_max_position_embeddings = original.value_or(c.max_position_embeddings);
  if (c.rope.original_max_position_embeddings <= 0)
    return Error{gguf.path() + ": rope.scaling.original_context_length must be positive"};
  LM_ASSIGN_OR_RETURN(auto beta_fast, gguf.get_float(p + "rope.scaling.yarn_beta_fast"));
  LM_ASSIGN_OR_RETURN(auto beta_slow, gguf.get_float(p + "rope.scaling.yarn_beta_slow"));
  c.rope.beta_fast = beta_fast.value_or(32.0);
  c.rope.beta_slow = beta_slow.value_or(1.0);
  if (!(c.rope.beta_fast > 0 && c.rope.beta_slow > 0))
    return Error{gguf.path() + ": rope.scaling.yarn_beta_fast/slow must be positive"};
  LM_ASSIGN_OR_RETURN(auto attn_factor, gguf.get_float(p + "rope.scaling.yarn_attn_factor"));
  if (attn_factor) c.rope.attention_factor = *attn_factor;
  LM_ASSIGN_OR_RETURN(auto log_mul, gguf.get_float(p + "rope.scaling.yarn_log_multiplier"));
  if (log_mul && *log_mul != 0) {
    c.rope.mscale = 1.0;
    c.rope.mscale_all_dim = *log_mul;
  }
  return {};
}

}  // namespace

std::string supported_architectures() {
  return "LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, "
         "Qwen2MoeForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, GemmaForCausalLM, "
         "Gemma2ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM";
}

Result<ModelConfig> parse_hf_config(const std::string& config_json, const std::string& origin) {
  const Json j = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Error{origin + ": not a JSON object"};
  Fields f(j, origin);
  ModelConfig c;

  std::string arch;
  if (auto it = j.find("architectures"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->empty() || !(*it)[0].is_string()) {
      return Error{origin + ": field 'architectures' should be a list of names"};
    }
    arch = (*it)[0].get<std::string>();
  } else {
    LM_ASSIGN_OR_RETURN(auto model_type, f.opt_string("model_type"));
    const std::string mt = model_type.value_or("");
    arch = mt == "llama"         ? "LlamaForCausalLM"
           : mt == "mistral"     ? "MistralForCausalLM"
           : mt == "mixtral"     ? "MixtralForCausalLM"
           : mt == "qwen2"       ? "Qwen2ForCausalLM"
           : mt == "qwen2_moe"   ? "Qwen2MoeForCausalLM"
           : mt == "qwen3"       ? "Qwen3ForCausalLM"
           : mt == "qwen3_moe"   ? "Qwen3MoeForCausalLM"
           : mt == "gemma"       ? "GemmaForCausalLM"
           : mt == "gemma2"      ? "Gemma2ForCausalLM"
           : mt == "gemma3_text" ? "Gemma3ForCausalLM"
           : mt == "phi3"        ? "Phi3ForCausalLM"
                                 : mt;
  }
  c.architecture_name = arch;
  if (arch == "LlamaForCausalLM") {
    c.architecture = Architecture::kLlama;
  } else if (arch == "MistralForCausalLM") {
    c.architecture = Architecture::kMistral;
  } else if (arch == "MixtralForCausalLM") {
    c.architecture = Architecture::kMixtral;
  } else if (arch == "Qwen2ForCausalLM") {
    c.architecture = Architecture::kQwen2;
  } else if (arch == "Qwen2MoeForCausalLM") {
    c.architecture = Architecture::kQwen2Moe;
  } else if (arch == "Qwen3ForCausalLM") {
    c.architecture = Architecture::kQwen3;
  } else if (arch == "Qwen3MoeForCausalLM") {
    c.architecture = Architecture::kQwen3Moe;
  } else if (arch == "GemmaForCausalLM") {
    c.architecture = Architecture::kGemma;
  } else if (arch == "Gemma2ForCausalLM") {
    c.architecture = Architecture::kGemma2;
  } else if (arch == "Gemma3ForCausalLM") {
    c.architecture = Architecture::kGemma3;
  } else if (arch == "Phi3ForCausalLM") {
    c.architecture = Architecture::kPhi3;
  } else {
    return Error{origin + ": unsupported architecture '" + arch +
                 "' (supported: " + supported_architectures() + ")"};
  }

  LM_ASSIGN_OR_RETURN(c.vocab_size, f.required_int("vocab_size"));
  LM_ASSIGN_OR_RETURN(c.hidden_size, f.required_int("hidden_size"));
  LM_ASSIGN_OR_RETURN(c.intermediate_size, f.required_int("intermediate_size"));
  LM_ASSIGN_OR_RETURN(c.num_hidden_layers, f.required_int("num_hidden_layers"));
  LM_ASSIGN_OR_RETURN(c.num_attention_heads, f.required_int("num_attention_heads"));
  LM_ASSIGN_OR_RETURN(c.num_key_value_heads,
                      f.int_or("num_key_value_heads", c.num_attention_heads));
  if (c.num_attention_heads <= 0) return Error{origin + ": num_attention_heads must be positive"};
  LM_ASSIGN_OR_RETURN(c.head_dim, f.int_or("head_dim", c.hidden_size / c.num_attention_heads));
  if (j.find("head_dim") == j.end() && c.hidden_size > 0 &&
      c.hidden_size % c.num_attention_heads != 0) {
    return Error{origin +
                 ": hidden_size is not a multiple of num_attention_heads and no head_dim is given"};
  }
  LM_ASSIGN_OR_RETURN(c.max_position_embeddings, f.int_or("max_position_embeddings", 2048));
  LM_ASSIGN_OR_RETURN(c.rms_norm_eps, f.number_or("rms_norm_eps", 1e-6));
  LM_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.bool_or("tie_word_embeddings", false));
  LM_ASSIGN_OR_RETURN(c.rope.theta, f.number_or("rope_theta", 10000.0));
  if (auto it = j.find("rope_scaling"); it != j.end() && !it->is_null()) {
    LM_RETURN_IF_ERROR(parse_rope_scaling(*it, origin, &c.rope));
  } else if (auto p = j.find("rope_parameters"); p != j.end() && !p->is_null()) {
    LM_RETURN_IF_ERROR(parse_rope_scaling(*p, origin, &c.rope));  // transformers 5 layout
  }

  // transformers' Mistral/Qwen2/Qwen3 configs default the window to 4096 when the key is missing
  // (an explicit null is none); Phi3Config's and MixtralConfig's default is none.
  LM_ASSIGN_OR_RETURN(const auto window, c.architecture == Architecture::kPhi3 ||
                                                 c.architecture == Architecture::kMixtral
                                             ? f.opt_int("sliding_window")
                                             : f.int_unless_null("sliding_window", 4096));
  const bool gemma = c.architecture == Architecture::kGemma ||
                     c.architecture == Architecture::kGemma2 ||
                     c.architecture == Architecture::kGemma3;
  if (gemma) {
    LM_RETURN_IF_ERROR(parse_gemma(j, f, origin, c));
  } else if (c.architecture == Architecture::kPhi3) {
    LM_RETURN_IF_ERROR(parse_phi3(j, f, origin, window, c));
  } else if (c.architecture == Architecture::kQwen2Moe ||
             c.architecture == Architecture::kQwen3Moe) {
    LM_RETURN_IF_ERROR(parse_qwen_moe_attention(j, f, origin, window, c));
  } else if (c.architecture == Architecture::kQwen2 || c.architecture == Architecture::kQwen3) {
    // Qwen2 always has q/k/v biases; Qwen3 has q/k norms and biases only when it says so.
    c.attention_bias = c.architecture == Architecture::kQwen2;
    c.qk_norm = c.architecture == Architecture::kQwen3;
    if (c.architecture == Architecture::kQwen3) {
      // Qwen3's attention_bias would add an o_proj bias too, which no checkpoint has.
      LM_ASSIGN_OR_RETURN(bool attention_bias, f.bool_or("attention_bias", false));
      if (attention_bias) return Error{origin + ": attention_bias on Qwen3 is not supported"};
    }
    // The window is used only with use_sliding_window, by the layers from max_window_layers on.
    LM_ASSIGN_OR_RETURN(bool use_sliding, f.bool_or("use_sliding_window", false));
    LM_ASSIGN_OR_RETURN(int64_t max_window_layers, f.int_or("max_window_layers", 28));
    LM_RETURN_IF_ERROR(parse_layer_windows(
        j, f, origin, use_sliding ? window : std::nullopt,
        [&](int64_t layer) { return layer >= max_window_layers; }, c));
  } else {
    LM_ASSIGN_OR_RETURN(bool attention_bias, f.bool_or("attention_bias", false));
    LM_ASSIGN_OR_RETURN(bool mlp_bias, f.bool_or("mlp_bias", false));
    if (attention_bias || mlp_bias) {
      return Error{origin + ": attention_bias/mlp_bias on " + arch + " is not supported"};
    }
    // Mistral and Mixtral: every layer (Mistral-7B-v0.1's 4096), whatever layer_types says
    // (transformers ignores it there); Llama has no window.
    LM_RETURN_IF_ERROR(parse_layer_windows(
        j, f, origin, c.architecture == Architecture::kLlama ? std::nullopt : window,
        [](int64_t) { return true; }, c, /*reads_layer_types=*/false));
  }
  if (c.architecture == Architecture::kMixtral || c.architecture == Architecture::kQwen2Moe ||
      c.architecture == Architecture::kQwen3Moe)
    LM_RETURN_IF_ERROR(parse_moe(j, f, origin, c));
  LM_RETURN_IF_ERROR(finish_longrope(f, origin, c));
  LM_RETURN_IF_ERROR(finish_yarn(f, origin, c));
  LM_RETURN_IF_ERROR(parse_activation(f, origin, c));
  LM_ASSIGN_OR_RETURN(auto bos, f.opt_int("bos_token_id"));
  if (bos && *bos >= 0 && *bos <= INT32_MAX) c.bos_token_id = static_cast<int32_t>(*bos);
  LM_ASSIGN_OR_RETURN(c.eos_token_ids, f.id_list("eos_token_id"));
  LM_RETURN_IF_ERROR(validate(c, origin));
  return c;
}

Result<ModelConfig> load_hf_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  LM_ASSIGN_OR_RETURN(std::string text, read_text_file(path, 16ull << 20));
  LM_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text, path));
  const std::string gen_path = dir + "/generation_config.json";
  if (file_exists(gen_path)) {
    LM_ASSIGN_OR_RETURN(std::string gen_text, read_text_file(gen_path, 16ull << 20));
    const Json g = Json::parse(gen_text, nullptr, /*allow_exceptions=*/false);
    if (g.is_discarded() || !g.is_object()) return Error{gen_path + ": not a JSON object"};
    LM_ASSIGN_OR_RETURN(auto eos, Fields(g, gen_path).id_list("eos_token_id"));
    if (!eos.empty()) c.eos_token_ids = std::move(eos);
    LM_RETURN_IF_ERROR(validate(c, gen_path));
  }
  return c;
}

Result<ModelConfig> config_from_gguf(const GgufFile& gguf) {
  ModelConfig c;
  const std::string& origin = gguf.path();
  LM_ASSIGN_OR_RETURN(auto arch, gguf.get_string("general.architecture"));
  if (!arch) return Error{origin + ": general.architecture is missing"};
  c.architecture_name = *arch;
  if (*arch == "llama") {
    c.architecture = Architecture::kLlama;
    c.rope.layout = RopeLayout::kInterleaved;  // llama.cpp's converter permuted Q/K rows
  } else if (*arch == "qwen2") {
    c.architecture = Architecture::kQwen2;
    c.attention_bias = true;
  } else if (*arch == "qwen3") {
    c.architecture = Architecture::kQwen3;
    c.qk_norm = true;
  } else if (*arch == "qwen2moe") {
    c.architecture = Architecture::kQwen2Moe;
    c.attention_bias = gguf.find_tensor("blk.0.attn_q.bias") != nullptr;
  } else if (*arch == "qwen3moe") {
    c.architecture = Architecture::kQwen3Moe;
    c.qk_norm = true;
  } else if (*arch == "gemma" || *arch == "gemma2" || *arch == "gemma3") {
    // llama.cpp's converter already stored the norms as 1 + w.
    c.architecture = *arch == "gemma"    ? Architecture::kGemma
                     : *arch == "gemma2" ? Architecture::kGemma2
                                         : Architecture::kGemma3;
    c.gemma_scaling = true;
    c.mlp_activation = MlpActivation::kGeluTanh;
    c.sandwich_norms = *arch != "gemma";
    c.qk_norm = *arch == "gemma3";
  } else if (*arch == "phi3") {
    c.architecture = Architecture::kPhi3;  // NeoX RoPE: the converter leaves Q/K rows as they are
  } else {
    return Error{origin + ": unsupported GGUF architecture '" + *arch +
                 "' (supported: llama, qwen2, qwen2moe, qwen3, qwen3moe, gemma, gemma2, "
                 "gemma3, phi3)"};
  }
  const std::string p = *arch + ".";
  auto required = [&](const std::string& key) -> Result<int64_t> {
    LM_ASSIGN_OR_RETURN(auto v, gguf.get_int(key));
    if (!v) return Error{origin + ": metadata '" + key + "' is missing"};
    return *v;
  };
  LM_ASSIGN_OR_RETURN(c.hidden_size, required(p + "embedding_length"));
  LM_ASSIGN_OR_RETURN(c.intermediate_size, required(p + "feed_forward_length"));
  LM_ASSIGN_OR_RETURN(c.num_hidden_layers, required(p + "block_count"));
  LM_ASSIGN_OR_RETURN(c.num_attention_heads, required(p + "attention.head_count"));
  LM_ASSIGN_OR_RETURN(auto kv_heads, gguf.get_int(p + "attention.head_count_kv"));
  c.num_key_value_heads = kv_heads.value_or(c.num_attention_heads);
  if (c.num_attention_heads <= 0) return Error{origin + ": attention.head_count must be positive"};
  LM_ASSIGN_OR_RETURN(auto key_length, gguf.get_int(p + "attention.key_length"));
  c.head_dim = key_length.value_or(c.hidden_size / c.num_attention_heads);
  LM_ASSIGN_OR_RETURN(auto rope_dims, gguf.get_int(p + "rope.dimension_count"));
  if (rope_dims && *rope_dims != c.head_dim) {
    // Partial rotary (Phi-4-mini): the leading rope.dimension_count elements of each head.
    if (c.architecture != Architecture::kPhi3 || *rope_dims < 2 || *rope_dims > c.head_dim ||
        *rope_dims % 2 != 0) {
      return Error{origin + ": rope.dimension_count " + std::to_string(*rope_dims) +
                   " differs from the head size " + std::to_string(c.head_dim) +
                   " (partial rotary from GGUF is supported for phi3, by an even count)"};
    }
    c.rotary_dim = *rope_dims;
  }
  LM_ASSIGN_OR_RETURN(auto ctx, gguf.get_int(p + "context_length"));
  c.max_position_embeddings = ctx.value_or(2048);
  LM_ASSIGN_OR_RETURN(auto eps, gguf.get_float(p + "attention.layer_norm_rms_epsilon"));
  c.rms_norm_eps = eps.value_or(1e-5);
  LM_ASSIGN_OR_RETURN(auto theta, gguf.get_float(p + "rope.freq_base"));
  c.rope.theta = theta.value_or(10000.0);
  LM_ASSIGN_OR_RETURN(auto scaling, gguf.get_string(p + "rope.scaling.type"));
  const bool phi3 = c.architecture == Architecture::kPhi3;
  if (scaling == "yarn") {
    LM_RETURN_IF_ERROR(yarn_from_gguf(gguf, p, c));
  } else if (scaling && *scaling != "none" && !(phi3 && *scaling == "longrope")) {
    if (*scaling != "linear") {
      return Error{origin + ": unsupported rope.scaling.type '" + *scaling +
                   "' (supported: none, linear, yarn; longrope for phi3)"};
    }
    c.rope.type = RopeType::kLinear;
    LM_ASSIGN_OR_RETURN(auto factor, gguf.get_float(p + "rope.scaling.factor"));
    c.rope.factor = factor.value_or(1.0);
  }
  if (phi3) LM_RETURN_IF_ERROR(phi3_from_gguf(gguf, p, scaling, c));
  if (c.architecture == Architecture::kGemma2 || c.architecture == Architecture::kGemma3)
    LM_RETURN_IF_ERROR(gemma_from_gguf(gguf, p, c));
  LM_RETURN_IF_ERROR(moe_from_gguf(gguf, p, c));
  LM_ASSIGN_OR_RETURN(auto tokens, gguf.get_string_array("tokenizer.ggml.tokens"));
  LM_ASSIGN_OR_RETURN(auto vocab, gguf.get_int(p + "vocab_size"));
  c.vocab_size = vocab.value_or(static_cast<int64_t>(tokens.size()));
  const GgufTensorInfo* embed = gguf.find_tensor("token_embd.weight");
  if (embed == nullptr) return Error{origin + ": tensor 'token_embd.weight' is missing"};
  if (!vocab) c.vocab_size = embed->shape[0];
  c.tie_word_embeddings = gguf.find_tensor("output.weight") == nullptr;
  LM_ASSIGN_OR_RETURN(auto bos, gguf.get_int("tokenizer.ggml.bos_token_id"));
  if (bos && *bos >= 0 && *bos < c.vocab_size) c.bos_token_id = static_cast<int32_t>(*bos);
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    LM_ASSIGN_OR_RETURN(auto eos, gguf.get_int(key));
    if (eos && *eos >= 0 && *eos < c.vocab_size &&
        std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), *eos) == c.eos_token_ids.end()) {
      c.eos_token_ids.push_back(static_cast<int32_t>(*eos));
    }
  }
  LM_RETURN_IF_ERROR(validate(c, origin));
  return c;
}

void override_rope_scaling(ModelConfig& c, const RopeScalingOverride& rope) {
  LM_CHECK(rope.factor > 0);
  c.rope.type = rope.type;
  c.rope.factor = rope.factor;
  // The config's own scaling parameters go with it (dynamic then counts from
  // max_position_embeddings, as transformers does without original_max_position_embeddings).
  c.rope.original_max_position_embeddings = 0;
  c.rope.low_freq_factor = 1.0;
  c.rope.high_freq_factor = 4.0;
  c.rope.attention_factor.reset();
}

}  // namespace lm
