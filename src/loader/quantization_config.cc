#include "loader/quantization_config.h"

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
  if (format == "float-quantized") {
    return bad(
        "is \"float-quantized\": FP8 compressed-tensors checkpoints are not supported yet "
        "(integer pack-quantized / int-quantized ones are)");
  }
  if (format != "pack-quantized" && format != "int-quantized" && format != "naive-quantized") {
    return bad("is \"" + format +
               "\": compressed-tensors formats pack-quantized, int-quantized and naive-quantized "
               "are supported");
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
  if (type.value_or("int") != "int") {
    return bad("weights.type is \"" + *type +
               "\": FP8/float weights (float-quantized) are not supported yet");
  }
  LM_ASSIGN_OR_RETURN(auto bits, f.integer("num_bits"));
  if (!bits || (*bits != 4 && *bits != 8)) {
    return bad("weights.num_bits is " + (bits ? std::to_string(*bits) : std::string("missing")) +
               ": 4- and 8-bit integer weights are supported");
  }
  s.bits = static_cast<int>(*bits);
  LM_ASSIGN_OR_RETURN(auto strategy, f.string("strategy"));
  s.strategy = strategy.value_or("tensor");
  if (s.strategy != "group" && s.strategy != "channel" && s.strategy != "tensor") {
    return bad("weights.strategy is \"" + s.strategy +
               "\": the group, channel and tensor strategies are supported");
  }
  if (s.strategy == "group") {
    LM_ASSIGN_OR_RETURN(auto group_size, f.integer("group_size"));
    if (!group_size || *group_size <= 0)
      return bad("weights.group_size must be > 0 for the group strategy");
    s.group_size = *group_size;
  }
  LM_ASSIGN_OR_RETURN(auto symmetric, f.boolean("symmetric"));
  s.symmetric = symmetric.value_or(true);
  LM_ASSIGN_OR_RETURN(auto dynamic, f.boolean("dynamic"));
  if (dynamic.value_or(false)) return bad("weights.dynamic is true: weights must be static");
  if (group.contains("input_activations") && !group["input_activations"].is_null()) {
    const Json& a = group["input_activations"];
    if (!a.is_object() || a.value("type", std::string("int")) != "int")
      return bad("input_activations are not int: FP8 activations are not supported yet");
    s.input_activations = true;
    if (s.format == "pack-quantized")
      return bad("quantizes activations: pack-quantized is a weight-only format");
  }
  if (group.contains("output_activations") && !group["output_activations"].is_null())
    return bad("output_activations are quantized: not supported");
  return s;
}

Status parse_compressed_tensors(const Json& j, QuantizationConfig& q) {
  const Fields f(j, q.origin);
  LM_ASSIGN_OR_RETURN(auto format, f.string("format"));
  q.format = format.value_or("");
  if (q.format != "mixed-precision")
    LM_RETURN_IF_ERROR(check_ct_format(q.format, "format", q.origin));
  const auto set = [&](const char* key) {
    return j.contains(key) && !j[key].is_null() && !(j[key].is_object() && j[key].empty());
  };
  if (set("kv_cache_scheme"))
    return f.bad("kv_cache_scheme", "is set: a quantized KV cache scheme is not supported");
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

}  // namespace

const char* quant_method_name(QuantMethod method) {
  switch (method) {
    case QuantMethod::kGptq:
      return "gptq";
    case QuantMethod::kAwq:
      return "awq";
    case QuantMethod::kCompressedTensors:
      return "compressed-tensors";
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
  } else {
    return Error{q.origin + ": quantization_config.quant_method \"" + method +
                 "\" is not supported (gptq, awq and compressed-tensors checkpoints are; FP8, "
                 "bitsandbytes, EETQ, EXL2 and others are not built)"};
  }
  return std::optional<QuantizationConfig>{std::move(q)};
}

Result<std::optional<QuantizationConfig>> read_quantization_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  LM_ASSIGN_OR_RETURN(std::string text, read_text_file(path, 16ull << 20));
  return parse_quantization_config(text, path, dir);
}

Status check_quantize_flag(const std::string& flag, const std::optional<QuantizationConfig>& q) {
  const bool pre_quantized_flag =
      flag == "gptq" || flag == "awq" || flag == "compressed-tensors" || flag == "marlin";
  if (!pre_quantized_flag) {
    return Error{"--quantize " + flag +
                 " (quantizing at load) is not built yet; --quantize gptq, awq, "
                 "compressed-tensors and marlin serve checkpoints quantized in that format"};
  }
  if (!q) {
    return Error{"--quantize " + flag +
                 ": the checkpoint has no quantization_config (it is not pre-quantized); "
                 "quantizing at load is not built yet"};
  }
  const std::string method = quant_method_name(q->method);
  const bool matches =
      flag == method || (flag == "marlin" && q->method != QuantMethod::kCompressedTensors);
  if (!matches) {
    return Error{"--quantize " + flag + ": the checkpoint is quantized with " + method + " (" +
                 q->origin + "); use --quantize " + method + " or leave it unset"};
  }
  return {};
}

}  // namespace lm
