#include "loader/quantization_config.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "base/text_file.h"

namespace lm {
namespace {

using Json = nlohmann::json;

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// Reads typed optional fields of one JSON object, with errors naming the file and the field.
class Fields {
 public:
  Fields(const Json& j, std::string where) : j_(j), where_(std::move(where)) {}

  Error bad(const std::string& key, const std::string& what) const {
    return Error{where_ + ": quantization_config." + key + " " + what};
  }
  bool has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }
  Result<std::optional<int64_t>> integer(const std::string& key) const {
    if (!has(key)) return std::optional<int64_t>{};
    if (!j_[key].is_number_integer()) return bad(key, "must be an integer");
    return std::optional<int64_t>{j_[key].get<int64_t>()};
  }
  Result<std::optional<bool>> boolean(const std::string& key) const {
    if (!has(key)) return std::optional<bool>{};
    if (!j_[key].is_boolean()) return bad(key, "must be true or false");
    return std::optional<bool>{j_[key].get<bool>()};
  }
  Result<std::optional<std::string>> string(const std::string& key) const {
    if (!has(key)) return std::optional<std::string>{};
    if (!j_[key].is_string()) return bad(key, "must be a string");
    return std::optional<std::string>{j_[key].get<std::string>()};
  }

 private:
  const Json& j_;
  std::string where_;
};

Status check_group_size(const Fields& f, const std::string& key, int64_t group_size) {
  if (group_size == -1 || group_size > 0) return {};
  return f.bad(key, "must be -1 (one group per row) or > 0, not " + std::to_string(group_size));
}

Status parse_gptq(const Json& j, QuantizationConfig& q) {
  const Fields f(j, q.origin);
  LM_ASSIGN_OR_RETURN(auto bits, f.integer("bits"));
  if (!bits) return f.bad("bits", "is missing");
  if (*bits != 4 && *bits != 8) {
    return f.bad("bits", "is " + std::to_string(*bits) +
                             ": GPTQ checkpoints of 4 and 8 bits are supported (2- and 3-bit "
                             "packings are not built)");
  }
  q.bits = static_cast<int>(*bits);
  LM_ASSIGN_OR_RETURN(auto group_size, f.integer("group_size"));
  if (!group_size) return f.bad("group_size", "is missing");
  LM_RETURN_IF_ERROR(check_group_size(f, "group_size", *group_size));
  q.group_size = *group_size;
  LM_ASSIGN_OR_RETURN(auto desc_act, f.boolean("desc_act"));
  q.desc_act = desc_act.value_or(false);
  LM_ASSIGN_OR_RETURN(auto sym, f.boolean("sym"));
  q.sym = sym.value_or(true);
  LM_ASSIGN_OR_RETURN(auto marlin, f.boolean("is_marlin_format"));
  if (marlin.value_or(false))
    return f.bad("is_marlin_format", "is true: Marlin-packed GPTQ weights are not supported");
  // gptqmodel writes `checkpoint_format` (older) or `format`; AutoGPTQ neither (v1).
  std::optional<std::string> format;
  for (const char* key : {"checkpoint_format", "format"}) {
    LM_ASSIGN_OR_RETURN(auto value, f.string(key));
    if (value && !format) format = lower(*value);
  }
  if (format && *format != "gptq" && *format != "gptq_v2") {
    return f.bad("checkpoint_format", "is \"" + *format +
                                          "\": GPTQ checkpoints in the \"gptq\" (v1) and "
                                          "\"gptq_v2\" formats are supported");
  }
  q.gptq_v1_zeros = !format || *format == "gptq";
  LM_ASSIGN_OR_RETURN(auto pack_dtype, f.string("pack_dtype"));
  if (pack_dtype && *pack_dtype != "int32" && *pack_dtype != "torch.int32")
    return f.bad("pack_dtype", "is \"" + *pack_dtype + "\": only int32 packing is supported");
  return {};
}

Status parse_awq(const Json& j, QuantizationConfig& q) {
  const Fields f(j, q.origin);
  // AutoAWQ's quant_config used w_bit / q_group_size; transformers' AwqConfig bits / group_size.
  std::optional<int64_t> bits, group_size;
  for (const char* key : {"bits", "w_bit"}) {
    LM_ASSIGN_OR_RETURN(auto v, f.integer(key));
    if (v && !bits) bits = v;
  }
  for (const char* key : {"group_size", "q_group_size"}) {
    LM_ASSIGN_OR_RETURN(auto v, f.integer(key));
    if (v && !group_size) group_size = v;
  }
  if (!bits || *bits != 4) {
    return f.bad("bits", bits ? "is " + std::to_string(*bits) + ": AWQ checkpoints are 4-bit"
                              : std::string("is missing"));
  }
  q.bits = 4;
  if (!group_size) return f.bad("group_size", "is missing");
  LM_RETURN_IF_ERROR(check_group_size(f, "group_size", *group_size));
  q.group_size = *group_size;
  // zero_point false (gptqmodel's symmetric AWQ) still stores qzeros (8 each): they are read.
  LM_ASSIGN_OR_RETURN(auto zero_point, f.boolean("zero_point"));
  q.sym = !zero_point.value_or(true);
  std::optional<std::string> version;
  for (const char* key : {"version", "format"}) {
    LM_ASSIGN_OR_RETURN(auto v, f.string(key));
    if (v && !version) version = lower(*v);
  }
  if (version && *version != "gemm") {
    return f.bad("version", "is \"" + *version +
                                "\": AWQ checkpoints in the GEMM packing (version \"gemm\") are "
                                "supported, not GEMV, Marlin or ExLlama packings");
  }
  return {};
}

Status check_ct_format(const std::string& format, const std::string& where,
                       const std::string& origin) {
  const auto bad = [&](const std::string& what) {
    return Error{origin + ": quantization_config." + where + " " + what};
  };
  if (format != "pack-quantized" && format != "int-quantized" && format != "naive-quantized" &&
      format != "float-quantized") {
    return bad("is \"" + format +
               "\": compressed-tensors formats pack-quantized, int-quantized, naive-quantized and "
               "float-quantized are supported");
  }
  return {};
}

Result<CompressedTensorsScheme> parse_ct_scheme(const std::string& name, const Json& group,
                                                const std::string& top_format,
                                                const std::string& origin) {
  const std::string where = "config_groups." + name;
  const auto bad = [&](const std::string& what) {
    return Error{origin + ": quantization_config." + where + " " + what};
  };
  if (!group.is_object()) return bad("is not an object");
  CompressedTensorsScheme s;
  // A group's own format wins over the top-level one ("mixed-precision" checkpoints).
  s.format = group.contains("format") && group["format"].is_string()
                 ? group["format"].get<std::string>()
                 : top_format;
  LM_RETURN_IF_ERROR(check_ct_format(s.format, where + ".format", origin));
  if (!group.contains("targets") || !group["targets"].is_array() || group["targets"].empty())
    return bad("needs a non-empty list \"targets\"");
  for (const Json& t : group["targets"]) {
    if (!t.is_string()) return bad("targets must be strings");
    s.targets.push_back(t.get<std::string>());
  }
  if (!group.contains("weights") || !group["weights"].is_object())
    return bad("has no \"weights\" arguments (activation-only quantization is not supported)");
  const Json& w = group["weights"];
  const Fields f(w, origin);
  LM_ASSIGN_OR_RETURN(auto type, f.string("type"));
  const std::string weight_type = type.value_or("int");
  if (weight_type != "int" && weight_type != "float")
    return bad("weights.type is \"" + weight_type + "\": int and float weights are supported");
  s.float_weights = weight_type == "float";
  LM_ASSIGN_OR_RETURN(auto bits, f.integer("num_bits"));
  if (s.float_weights && (!bits || *bits != 8)) {
    return bad("weights.num_bits is " + (bits ? std::to_string(*bits) : std::string("missing")) +
               ": float weights are FP8 (8 bits; FP4 is not built)");
  }
  if (!bits || (*bits != 4 && *bits != 8)) {
    return bad("weights.num_bits is " + (bits ? std::to_string(*bits) : std::string("missing")) +
               ": 4- and 8-bit integer weights are supported");
  }
  s.bits = static_cast<int>(*bits);
  if (s.float_weights != (s.format == "float-quantized") && s.format != "naive-quantized") {
    return bad("weights.type \"" + weight_type + "\" cannot be stored as " + s.format);
  }
  LM_ASSIGN_OR_RETURN(auto strategy, f.string("strategy"));
  s.strategy = strategy.value_or("tensor");
  const bool block = s.float_weights && s.strategy == "block";
  if (s.strategy != "group" && s.strategy != "channel" && s.strategy != "tensor" && !block) {
    return bad("weights.strategy is \"" + s.strategy +
               "\": the group, channel and tensor strategies (and block, for FP8) are supported");
  }
  if (block) {
    if (!w.contains("block_structure") || !w["block_structure"].is_array() ||
        w["block_structure"].size() != 2 || !w["block_structure"][0].is_number_integer() ||
        !w["block_structure"][1].is_number_integer() ||
        w["block_structure"][0].get<int64_t>() <= 0 ||
        w["block_structure"][1].get<int64_t>() <= 0) {
      return bad("weights.block_structure must be two positive integers for the block strategy");
    }
    s.block_rows = w["block_structure"][0].get<int64_t>();
    s.block_cols = w["block_structure"][1].get<int64_t>();
  }
  if (s.strategy == "group") {
    LM_ASSIGN_OR_RETURN(auto group_size, f.integer("group_size"));
    if (!group_size || *group_size <= 0)
      return bad("weights.group_size must be > 0 for the group strategy");
    s.group_size = *group_size;
  }
  LM_ASSIGN_OR_RETURN(auto symmetric, f.boolean("symmetric"));
  s.symmetric = symmetric.value_or(true);
  if (s.float_weights && !s.symmetric)
    return bad("weights.symmetric is false: FP8 weights with a zero-point are not supported");
  LM_ASSIGN_OR_RETURN(auto dynamic, f.boolean("dynamic"));
  if (dynamic.value_or(false)) return bad("weights.dynamic is true: weights must be static");
  if (group.contains("input_activations") && !group["input_activations"].is_null()) {
    const Json& a = group["input_activations"];
    const std::string want = s.float_weights ? "float" : "int";
    if (!a.is_object() || (a.contains("type") && !a["type"].is_string()) ||
        a.value("type", std::string("int")) != want) {
      return bad("input_activations must be of type \"" + want + "\" with " + want + " weights");
    }
    s.input_activations = true;
    if (s.format == "pack-quantized")
      return bad("quantizes activations: pack-quantized is a weight-only format");
  }
  if (group.contains("output_activations") && !group["output_activations"].is_null())
    return bad("output_activations are quantized: not supported");
  return s;
}

// compressed-tensors' kv_cache_scheme: llmcompressor's FP8 KV cache, one static scale per layer
// for K and one for V (self_attn.k_scale / v_scale, read with the weights). Anything else (int8,
// per-head or dynamic scales) is refused by name.
Status check_kv_cache_scheme(const Json& s, const std::string& origin) {
  const auto bad = [&](const std::string& why) {
    return Error{origin + ": quantization_config.kv_cache_scheme " + why};
  };
  if (!s.is_object()) return bad("must be an object");
  const Fields f(s, origin);
  LM_ASSIGN_OR_RETURN(auto type, f.string("type"));
  LM_ASSIGN_OR_RETURN(auto bits, f.integer("num_bits"));
  if (type.value_or("int") != "float" || bits.value_or(8) != 8)
    return bad("must be FP8 (type \"float\", num_bits 8): other KV cache types are not built");
  LM_ASSIGN_OR_RETURN(auto strategy, f.string("strategy"));
  if (strategy.value_or("tensor") != "tensor")
    return bad("strategy is \"" + *strategy + "\": only one scale per layer (\"tensor\") is built");
  LM_ASSIGN_OR_RETURN(auto dynamic, f.boolean("dynamic"));
  if (dynamic.value_or(false)) return bad("is dynamic: only static (checkpoint) scales are built");
  LM_ASSIGN_OR_RETURN(auto symmetric, f.boolean("symmetric"));
  if (!symmetric.value_or(true)) return bad("is asymmetric: FP8 scales have no zero point");
  return {};
}

Status parse_compressed_tensors(const Json& j, QuantizationConfig& q) {
  const Fields f(j, q.origin);
  LM_ASSIGN_OR_RETURN(auto format, f.string("format"));
  q.format = format.value_or("");
  const auto set = [&](const char* key) {
    return j.contains(key) && !j[key].is_null() && !(j[key].is_object() && j[key].empty());
  };
  if (set("kv_cache_scheme")) {
    LM_RETURN_IF_ERROR(check_kv_cache_scheme(j["kv_cache_scheme"], q.origin));
    q.kv_cache_fp8_scales = true;
  }
  // A checkpoint whose only quantization is its KV cache (llmcompressor's kv_cache_scheme alone)
  // has float ("dense") weights and no config group.
  if (q.kv_cache_fp8_scales && !set("config_groups")) return {};
  if (q.format != "mixed-precision")
    LM_RETURN_IF_ERROR(check_ct_format(q.format, "format", q.origin));
  if (set("transform_config"))
    return f.bad("transform_config", "is set: transformed (rotated) weights are not supported");
  if (set("sparsity_config"))
    return f.bad("sparsity_config", "is set: sparse (2:4) weights are not supported");
  if (!j.contains("config_groups") || !j["config_groups"].is_object() ||
      j["config_groups"].empty()) {
    return f.bad("config_groups", "must be a non-empty object");
  }
  for (const auto& [name, group] : j["config_groups"].items()) {
    LM_ASSIGN_OR_RETURN(CompressedTensorsScheme s,
                        parse_ct_scheme(name, group, q.format, q.origin));
    q.schemes.push_back(std::move(s));
  }
  return {};
}

// "fp8" (transformers' FineGrainedFP8Config, AutoFP8) and "fbgemm_fp8": E4M3 weights whose
// scales (weight_scale_inv per block, or weight_scale per tensor / row) are read with them.
Status parse_fp8(const Json& j, QuantizationConfig& q) {
  const Fields f(j, q.origin);
  LM_ASSIGN_OR_RETURN(auto scheme, f.string("activation_scheme"));
  if (scheme && *scheme != "dynamic" && *scheme != "static")
    return f.bad("activation_scheme", "is \"" + *scheme + "\": dynamic or static");
  if (f.has("weight_block_size")) {
    const Json& b = j["weight_block_size"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
        b[0].get<int64_t>() <= 0 || b[1].get<int64_t>() <= 0) {
      return f.bad("weight_block_size", "must be two positive integers");
    }
    q.fp8_block_rows = b[0].get<int64_t>();
    q.fp8_block_cols = b[1].get<int64_t>();
  }
  return {};
}

}  // namespace

const char* quant_method_name(QuantMethod method) {
  switch (method) {
    case QuantMethod::kGptq:
      return "gptq";
    case QuantMethod::kAwq:
      return "awq";
    case QuantMethod::kCompressedTensors:
      return "compressed-tensors";
    case QuantMethod::kFp8:
      return "fp8";
  }
  return "?";
}

Result<std::optional<QuantizationConfig>> parse_quantization_config(const std::string& config,
                                                                    const std::string& origin,
                                                                    const std::string& dir) {
  const Json root = Json::parse(config, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return Error{origin + ": not a JSON object"};
  QuantizationConfig q;
  Json j;
  if (root.contains("quantization_config") && !root["quantization_config"].is_null()) {
    j = root["quantization_config"];
    q.origin = origin;
  } else if (const std::string legacy = dir + "/quantize_config.json"; file_exists(legacy)) {
    LM_ASSIGN_OR_RETURN(std::string text, read_text_file(legacy, 1ull << 20));
    j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    q.origin = legacy;
    if (j.is_discarded()) return Error{legacy + ": not JSON"};
    // AutoGPTQ's file has no quant_method: it is GPTQ.
    if (j.is_object() && !j.contains("quant_method")) j["quant_method"] = "gptq";
  } else {
    return std::optional<QuantizationConfig>{};
  }
  if (!j.is_object()) return Error{q.origin + ": quantization_config is not an object"};
  if (!j.contains("quant_method") || !j["quant_method"].is_string())
    return Error{q.origin + ": quantization_config.quant_method is missing"};
  const std::string method = lower(j["quant_method"].get<std::string>());
  if (method == "gptq") {
    q.method = QuantMethod::kGptq;
    LM_RETURN_IF_ERROR(parse_gptq(j, q));
  } else if (method == "awq") {
    q.method = QuantMethod::kAwq;
    LM_RETURN_IF_ERROR(parse_awq(j, q));
  } else if (method == "compressed-tensors") {
    q.method = QuantMethod::kCompressedTensors;
    LM_RETURN_IF_ERROR(parse_compressed_tensors(j, q));
  } else if (method == "fp8" || method == "fbgemm_fp8") {
    q.method = QuantMethod::kFp8;
    q.fp8_method = method;
    LM_RETURN_IF_ERROR(parse_fp8(j, q));
  } else {
    return Error{q.origin + ": quantization_config.quant_method \"" + method +
                 "\" is not supported (gptq, awq, compressed-tensors, fp8 and fbgemm_fp8 "
                 "checkpoints are; bitsandbytes-, EETQ- and EXL2-saved ones and others are not "
                 "built)"};
  }
  return std::optional<QuantizationConfig>{std::move(q)};
}

Result<std::optional<QuantizationConfig>> read_quantization_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  LM_ASSIGN_OR_RETURN(std::string text, read_text_file(path, 16ull << 20));
  return parse_quantization_config(text, path, dir);
}

Status check_quantize_flag(const std::string& flag, const std::optional<QuantizationConfig>& q) {
  const bool pre_quantized_flag = flag == "gptq" || flag == "awq" || flag == "compressed-tensors" ||
                                  flag == "marlin" || flag == "fp8";
  if (!pre_quantized_flag) {
    return Error{"--quantize " + flag +
                 " (quantizing at load) is not built yet; --quantize gptq, awq, "
                 "compressed-tensors, fp8 and marlin serve checkpoints quantized in that format"};
  }
  if (!q) {
    return Error{"--quantize " + flag +
                 ": the checkpoint has no quantization_config (it is not pre-quantized)"};
  }
  const std::string method = quant_method_name(q->method);
  // marlin: TGI's GPU kernel for GPTQ/AWQ weights; fp8 names FP8 compressed-tensors too (TGI
  // picks its FP8 kernels for both).
  const bool ct_fp8 = q->method == QuantMethod::kCompressedTensors &&
                      std::any_of(q->schemes.begin(), q->schemes.end(),
                                  [](const CompressedTensorsScheme& s) { return s.float_weights; });
  const bool matches =
      flag == method ||
      (flag == "marlin" && (q->method == QuantMethod::kGptq || q->method == QuantMethod::kAwq)) ||
      (flag == "fp8" && ct_fp8);
  if (!matches) {
    return Error{"--quantize " + flag + ": the checkpoint is quantized with " + method + " (" +
                 q->origin + "); use --quantize " + method + " or leave it unset"};
  }
  return {};
}

}  // namespace lm
