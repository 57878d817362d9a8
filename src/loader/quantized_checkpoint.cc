#include "loader/quantized_checkpoint.h"

#include <regex>

#include "loader/integer_linear.h"
#include "loader/packed_linears.h"

namespace lm {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The tensors a quantized module stores (GPTQ/AWQ, or compressed-tensors in `ct_format`), after
// the module's name.
std::vector<std::string> module_suffixes(const QuantizationConfig& q,
                                         const std::string& ct_format) {
  if (q.method != QuantMethod::kCompressedTensors)
    return {".qweight", ".qzeros", ".scales", ".g_idx"};
  if (ct_format == "pack-quantized") {
    return {".weight_packed", ".weight_shape", ".weight_scale", ".weight_zero_point",
            ".weight_g_idx"};
  }
  return {".weight", ".weight_scale", ".weight_zero_point", ".weight_g_idx"};
}

// The modules stored quantized: named by their packed weight (qweight, weight_packed), or by an
// int8 weight (compressed-tensors int-/naive-quantized).
std::vector<std::string> quantized_modules(const QuantizationConfig& q,
                                           const std::map<std::string, Tensor>& tensors) {
  std::vector<std::string> modules;
  for (const auto& [name, t] : tensors) {
    for (const char* suffix : {".qweight", ".weight_packed", ".weight"}) {
      const bool ct = q.method == QuantMethod::kCompressedTensors;
      if (ct != (std::string(suffix) != ".qweight")) continue;
      if (std::string(suffix) == ".weight" && t.dtype != DType::kI8) continue;
      if (ends_with(name, suffix))
        modules.push_back(name.substr(0, name.size() - std::string(suffix).size()));
    }
  }
  return modules;
}

// compressed-tensors: the first config group whose targets name the module ("Linear" names
// every Linear; "re:" patterns match from the start of the name, as Python's re.match).
Result<const CompressedTensorsScheme*> scheme_of(const QuantizationConfig& q,
                                                 const std::string& module) {
  for (const CompressedTensorsScheme& s : q.schemes) {
    for (const std::string& target : s.targets) {
      if (target == "Linear" || target == module) return &s;
      if (target.rfind("re:", 0) == 0) {
        try {
          if (std::regex_search(module, std::regex(target.substr(3)),
                                std::regex_constants::match_continuous))
            return &s;
        } catch (const std::regex_error&) {
          return Error{q.origin + ": quantization_config target \"" + target +
                       "\" is not a valid regular expression"};
        }
      }
    }
  }
  return Error{module + ": stored quantized, but no config group of " + q.origin + " targets it"};
}

}  // namespace

Result<RepackSummary> repack_quantized_linears(const QuantizationConfig& q,
                                               std::map<std::string, Tensor>& tensors,
                                               std::vector<std::shared_ptr<const void>>& owners) {
  const TensorLookup find = [&](const std::string& name) -> const Tensor* {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  };
  RepackSummary summary;
  const std::vector<std::string> modules = quantized_modules(q, tensors);
  if (modules.empty()) {
    return Error{
        q.origin + ": quantization_config says " + quant_method_name(q.method) +
        ", but no tensor is stored quantized (no " +
        (q.method == QuantMethod::kCompressedTensors ? "weight_packed or int8 weight" : "qweight") +
        ")"};
  }
  int64_t num_input_activations = 0;
  for (const std::string& module : modules) {
    Result<IntegerLinear> w = Error{};
    std::string ct_format;
    if (q.method == QuantMethod::kGptq) {
      w = read_gptq_linear(q, module, find);
    } else if (q.method == QuantMethod::kAwq) {
      w = read_awq_linear(q, module, find);
    } else {
      LM_ASSIGN_OR_RETURN(const CompressedTensorsScheme* scheme, scheme_of(q, module));
      num_input_activations += scheme->input_activations ? 1 : 0;
      ct_format = scheme->format;
      const bool packed_here = tensors.contains(module + ".weight_packed");
      if (packed_here != (ct_format == "pack-quantized")) {
        return Error{module + ": stored " + (packed_here ? "packed" : "as int8") +
                     ", but its config group's format is " + ct_format};
      }
      w = read_compressed_tensors_linear(q, *scheme, module, find);
    }
    if (!w.ok()) return std::move(w).error();
    const std::string weight_name = module + ".weight";
    if (q.method != QuantMethod::kCompressedTensors || ct_format == "pack-quantized") {
      if (tensors.contains(weight_name))
        return Error{weight_name + ": stored both quantized and as a plain weight"};
    }
    LM_ASSIGN_OR_RETURN(RepackedLinear repacked, repack_integer_linear(*w, weight_name));
    for (const std::string& suffix : module_suffixes(q, ct_format)) tensors.erase(module + suffix);
    tensors.emplace(weight_name, repacked.weight);
    owners.push_back(std::move(repacked.storage));
    ++summary.num_by_dtype[repacked.weight.dtype];
  }
  std::string held;
  for (const auto& [dtype, n] : summary.num_by_dtype)
    held +=
        (held.empty() ? "" : ", ") + std::to_string(n) + " as " + std::string(dtype_name(dtype));
  std::string what = quant_method_name(q.method);
  if (q.method == QuantMethod::kCompressedTensors)
    what += " " + q.format;
  else
    what += " " + std::to_string(q.bits) + "-bit";
  summary.text =
      what + ": " + std::to_string(modules.size()) + " quantized Linears repacked (" + held + ")";
  if (summary.num_by_dtype.contains(DType::kF32)) {
    summary.text +=
        "; F32 ones had no exact block format (group not a multiple of 32, scales not fp16, or "
        "an 8-bit zero-point) and stream 4 bytes a weight";
  }
  if (num_input_activations > 0) {
    summary.text +=
        "; activations are quantized per block of 32 (--int8-activations), not per token";
  }
  return summary;
}

}  // namespace lm
