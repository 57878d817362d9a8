#include "loader/quantized_checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <regex>
#include <thread>

#include "base/thread_pool.h"
#include "loader/fp8_linear.h"
#include "loader/integer_linear.h"
#include "loader/packed_linears.h"

namespace lm {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The tensors a quantized module stores (GPTQ/AWQ, FP8, or compressed-tensors in `ct_format`),
// after the module's name. An FP8 module's activation scales go with it (static activation
// schemes: we do not quantize activations to FP8).
std::vector<std::string> module_suffixes(const QuantizationConfig& q, const std::string& ct_format,
                                         bool fp8) {
  if (fp8) {
    return {".weight",      ".weight_scale",    ".weight_scale_inv",
            ".input_scale", ".input_scale_inv", ".input_zero_point"};
  }
  if (q.method != QuantMethod::kCompressedTensors)
    return {".qweight", ".qzeros", ".scales", ".g_idx"};
  if (ct_format == "pack-quantized") {
    return {".weight_packed", ".weight_shape", ".weight_scale", ".weight_zero_point",
            ".weight_g_idx"};
  }
  return {".weight", ".weight_scale", ".weight_zero_point", ".weight_g_idx"};
}

// The modules stored quantized: named by their packed weight (qweight, weight_packed), or by an
// int8 weight (compressed-tensors int-/naive-quantized) or an FP8 one (compressed-tensors, fp8).
std::vector<std::string> quantized_modules(const QuantizationConfig& q,
                                           const std::map<std::string, Tensor>& tensors) {
  std::vector<std::string> modules;
  for (const auto& [name, t] : tensors) {
    for (const char* suffix : {".qweight", ".weight_packed", ".weight"}) {
      const std::string s = suffix;
      const bool gptq_like = q.method == QuantMethod::kGptq || q.method == QuantMethod::kAwq;
      if (gptq_like != (s == ".qweight")) continue;
      if (q.method == QuantMethod::kFp8 && s != ".weight") continue;
      if (s == ".weight" && !is_fp8(t.dtype) &&
          (t.dtype != DType::kI8 || q.method != QuantMethod::kCompressedTensors))
        continue;
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

// One module's weight repacked, and what the summary and the tensors' removal need of it.
struct ModuleRepack {
  RepackedLinear repacked;
  bool fp8 = false;
  bool input_activations = false;  // compressed-tensors: its scheme quantizes activations
  bool file_view = false;          // an FP8 weight kept as stored: its bytes are the file's
  std::string ct_format;
};

// `scratch`: memory the integers reuse, given back when the module is repacked.
Result<ModuleRepack> repack_module(const QuantizationConfig& q, const std::string& module,
                                   const TensorLookup& find, std::vector<int16_t>& scratch) {
  // The reading and the repack; then the module's checkpoint tensors are done with.
  ModuleRepack out;
  const std::string weight_name = module + ".weight";
  const Tensor* plain = find(weight_name);
  out.fp8 = plain != nullptr && is_fp8(plain->dtype);
  const CompressedTensorsScheme* scheme = nullptr;
  if (q.method == QuantMethod::kCompressedTensors) {
    LM_ASSIGN_OR_RETURN(scheme, scheme_of(q, module));
    out.input_activations = scheme->input_activations;
    out.ct_format = scheme->format;
    const bool packed_here = find(module + ".weight_packed") != nullptr;
    if (packed_here != (out.ct_format == "pack-quantized") || out.fp8 != scheme->float_weights) {
      return Error{module + ": stored " +
                   (packed_here ? "packed"
                    : out.fp8   ? "as FP8"
                                : "as int8") +
                   ", but its config group's format is " + out.ct_format + " with " +
                   (scheme->float_weights ? "float" : "int") + " weights"};
    }
  }
  if (out.fp8) {
    LM_ASSIGN_OR_RETURN(Fp8Linear w, read_fp8_linear(q, scheme, module, find));
    out.file_view = w.rows % kFp8PanelRows == 0;
    out.repacked = out.file_view ? fp8_weight_as_stored(w) : dequantize_fp8_linear(w);
    return out;
  }
  Result<IntegerLinear> w = Error{};
  if (q.method == QuantMethod::kGptq) {
    w = read_gptq_linear(q, module, find, std::move(scratch));
  } else if (q.method == QuantMethod::kAwq) {
    w = read_awq_linear(q, module, find, std::move(scratch));
  } else {
    w = read_compressed_tensors_linear(q, *scheme, module, find, std::move(scratch));
  }
  if (!w.ok()) return std::move(w).error();
  if (q.method != QuantMethod::kCompressedTensors || out.ct_format == "pack-quantized") {
    if (plain != nullptr)
      return Error{weight_name + ": stored both quantized and as a plain weight"};
  }
  LM_ASSIGN_OR_RETURN(out.repacked, repack_integer_linear(*w, weight_name));
  scratch = std::move(w->q);
  return out;
}

// Threads for the repack: one per hardware thread, at most kMaxRepackThreads, and no more than
// fit an eighth of the memory available now, each holding up to 4 bytes a weight of the largest
// module while it works (its integers as int16, an act-order copy of them): a 70B's largest module
// is 235M weights, ~0.9 GB a thread.
int repack_threads(const std::vector<std::string>& modules,
                   const std::map<std::string, Tensor>& tensors) {
  constexpr int kMaxRepackThreads = 8;
  int64_t largest = 0;  // bytes of the largest module's biggest tensor, >= its weights / 2
  for (const std::string& module : modules) {
    for (const char* suffix : {".qweight", ".weight_packed", ".weight"}) {
      auto it = tensors.find(module + suffix);
      if (it != tensors.end()) largest = std::max(largest, it->second.numel() * 4);
    }
  }
  const int64_t per_thread = std::max<int64_t>(1, largest * 2 * 4);  // weights <= 2 / byte
  const int64_t available = static_cast<int64_t>(::sysconf(_SC_AVPHYS_PAGES)) *
                            static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
  const auto hardware = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t fit = available > 0 ? available / 8 / per_thread : 1;
  return static_cast<int>(std::clamp<int64_t>(std::min(hardware, fit), 1, kMaxRepackThreads));
}

}  // namespace

Result<RepackSummary> repack_quantized_linears(const QuantizationConfig& q,
                                               std::map<std::string, Tensor>& tensors,
                                               std::vector<std::shared_ptr<const void>>& owners,
                                               const PackedTensorsDone& done) {
  const TensorLookup find = [&](const std::string& name) -> const Tensor* {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  };
  RepackSummary summary;
  if (!q.quantizes_weights()) return summary;  // float weights (only the KV cache is quantized)
  const std::vector<std::string> modules = quantized_modules(q, tensors);
  if (modules.empty()) {
    const char* expected = q.method == QuantMethod::kCompressedTensors
                               ? "weight_packed, int8 or FP8 weight"
                           : q.method == QuantMethod::kFp8 ? "FP8 weight"
                                                           : "qweight";
    return Error{q.origin + ": quantization_config says " + quant_method_name(q.method) +
                 ", but no tensor is stored quantized (no " + expected + ")"};
  }
  // Modules are independent: each reads only its own tensors, and `tensors` is not changed until
  // all are repacked, so they run on several threads (unpacking a 7B checkpoint's packs one
  // module after another took most of its load). The first error in module order is the one
  // reported, as when they ran in order.
  std::vector<std::optional<Result<ModuleRepack>>> results(modules.size());
  ThreadPool pool(repack_threads(modules, tensors));
  pool.parallel_for(static_cast<int64_t>(modules.size()), [&](int64_t begin, int64_t end) {
    std::vector<int16_t> scratch;
    for (int64_t i = begin; i < end; ++i) {
      const std::string& module = modules[static_cast<size_t>(i)];
      auto& result = results[static_cast<size_t>(i)];
      result = repack_module(q, module, find, scratch);
      if (!done || !result->ok()) continue;
      // The packed tensors are read once: their file pages go back as each module is done, so
      // the load never holds a checkpoint's packs and their repacks at once.
      const ModuleRepack& m = result->value();
      for (const std::string& suffix : module_suffixes(q, m.ct_format, m.fp8)) {
        const Tensor* t = find(module + suffix);
        if (t != nullptr && t->data != m.repacked.weight.data) done(*t);
      }
    }
  });
  int64_t num_input_activations = 0, num_fp8 = 0;
  for (size_t i = 0; i < modules.size(); ++i) {
    if (!results[i]->ok()) return std::move(*results[i]).error();
    ModuleRepack& m = results[i]->value();
    for (const std::string& suffix : module_suffixes(q, m.ct_format, m.fp8))
      tensors.erase(modules[i] + suffix);
    tensors.emplace(modules[i] + ".weight", m.repacked.weight);
    if (!m.file_view) {
      summary.repacked_bytes.emplace_back(
          static_cast<const uint8_t*>(m.repacked.weight.data),
          static_cast<size_t>(m.repacked.weight.dim(0) * m.repacked.weight.row_bytes()));
    }
    owners.push_back(std::move(m.repacked.storage));
    ++summary.num_by_dtype[m.repacked.weight.dtype];
    num_input_activations += m.input_activations ? 1 : 0;
    num_fp8 += m.fp8 ? 1 : 0;
  }
  std::string held;
  for (const auto& [dtype, n] : summary.num_by_dtype)
    held +=
        (held.empty() ? "" : ", ") + std::to_string(n) + " as " + std::string(dtype_name(dtype));
  std::string what = quant_method_name(q.method);
  if (q.method == QuantMethod::kCompressedTensors)
    what += " " + q.format;
  else if (q.method == QuantMethod::kFp8)
    what = q.fp8_method;
  else
    what += " " + std::to_string(q.bits) + "-bit";
  summary.text =
      what + ": " + std::to_string(modules.size()) + " quantized Linears repacked (" + held + ")";
  if (num_fp8 > 0) {
    summary.text +=
        "; FP8 weights times their scales in fp32, computed from their bytes (F32: "
        "Linears whose rows are not a multiple of " +
        std::to_string(kFp8PanelRows) + ", dequantized at load)";
  }
  if (summary.num_by_dtype.contains(DType::kF32) && num_fp8 == 0) {
    summary.text +=
        "; F32 ones had no exact block format (group not a multiple of 32, scales not fp16, or "
        "an 8-bit zero-point) and stream 4 bytes a weight";
  }
  if (num_input_activations > 0) {
    summary.text +=
        num_fp8 > 0 ? "; activations are not quantized to FP8 (fp32; int8 per block of 32 for "
                      "block-format weights with --int8-activations)"
                    : "; activations are quantized per block of 32 (--int8-activations), not per "
                      "token";
  }
  return summary;
}

}  // namespace lm
