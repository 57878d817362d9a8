#include "model/model_config.h"

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
  for (int32_t id : c.eos_token_ids) {
    if (id >= c.vocab_size)
      return Error{origin + ": eos_token_id " + std::to_string(id) + " is outside the vocabulary"};
  }
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
  } else {
    return Error{origin + ": unsupported rope scaling type '" + t +
                 "' (supported: linear, dynamic, llama3)"};
  }
  LM_ASSIGN_OR_RETURN(out->theta, f.number_or("rope_theta", out->theta));
  LM_ASSIGN_OR_RETURN(out->factor, f.number_or("factor", 1.0));
  LM_ASSIGN_OR_RETURN(out->low_freq_factor, f.number_or("low_freq_factor", 1.0));
  LM_ASSIGN_OR_RETURN(out->high_freq_factor, f.number_or("high_freq_factor", 4.0));
  LM_ASSIGN_OR_RETURN(out->original_max_position_embeddings,
                      f.int_or("original_max_position_embeddings", 0));
  return {};
}

}  // namespace

std::string supported_architectures() {
  return "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM";
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
    arch = mt == "llama"     ? "LlamaForCausalLM"
           : mt == "mistral" ? "MistralForCausalLM"
           : mt == "qwen2"   ? "Qwen2ForCausalLM"
                             : mt;
  }
  c.architecture_name = arch;
  if (arch == "LlamaForCausalLM") {
    c.architecture = Architecture::kLlama;
  } else if (arch == "MistralForCausalLM") {
    c.architecture = Architecture::kMistral;
  } else if (arch == "Qwen2ForCausalLM") {
    c.architecture = Architecture::kQwen2;
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

  if (c.architecture == Architecture::kQwen2) {
    c.attention_bias = true;
    LM_ASSIGN_OR_RETURN(bool use_sliding, f.bool_or("use_sliding_window", false));
    if (use_sliding) {
      LM_ASSIGN_OR_RETURN(c.sliding_window, f.opt_int("sliding_window"));
    }
  } else {
    LM_ASSIGN_OR_RETURN(bool attention_bias, f.bool_or("attention_bias", false));
    LM_ASSIGN_OR_RETURN(bool mlp_bias, f.bool_or("mlp_bias", false));
    if (attention_bias || mlp_bias) {
      return Error{origin + ": attention_bias/mlp_bias on " + arch + " is not supported"};
    }
    if (c.architecture == Architecture::kMistral) {
      LM_ASSIGN_OR_RETURN(c.sliding_window, f.opt_int("sliding_window"));
    }
  }
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
  } else {
    return Error{origin + ": unsupported GGUF architecture '" + *arch +
                 "' (supported: llama, qwen2)"};
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
  LM_ASSIGN_OR_RETURN(auto ctx, gguf.get_int(p + "context_length"));
  c.max_position_embeddings = ctx.value_or(2048);
  LM_ASSIGN_OR_RETURN(auto eps, gguf.get_float(p + "attention.layer_norm_rms_epsilon"));
  c.rms_norm_eps = eps.value_or(1e-5);
  LM_ASSIGN_OR_RETURN(auto theta, gguf.get_float(p + "rope.freq_base"));
  c.rope.theta = theta.value_or(10000.0);
  LM_ASSIGN_OR_RETURN(auto scaling, gguf.get_string(p + "rope.scaling.type"));
  if (scaling && *scaling != "none") {
    if (*scaling != "linear") {
      return Error{origin + ": unsupported rope.scaling.type '" + *scaling +
                   "' (supported: none, linear)"};
    }
    c.rope.type = RopeType::kLinear;
    LM_ASSIGN_OR_RETURN(auto factor, gguf.get_float(p + "rope.scaling.factor"));
    c.rope.factor = factor.value_or(1.0);
  }
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
}

}  // namespace lm
