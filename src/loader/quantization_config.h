// The `quantization_config` of a Hugging Face checkpoint (config.json, else AutoGPTQ's
// quantize_config.json): which pre-quantized format its Linear weights are stored in (GPTQ, AWQ,
// compressed-tensors) and with which parameters, read once and validated. Formats that are not
// built (FP8, Marlin-packed, 2/3-bit, ...) are refused here by name, before a tensor is read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace lm {

enum class QuantMethod : uint8_t { kGptq, kAwq, kCompressedTensors };

// The method's name as config.json and TGI's --quantize spell it.
const char* quant_method_name(QuantMethod method);

// One compressed-tensors config group: the weights' quantization arguments and the modules it
// targets ("Linear", exact module names, or "re:<regex>" matched from the name's start).
struct CompressedTensorsScheme {
  std::vector<std::string> targets;
  std::string format;  // "pack-quantized", "int-quantized" or "naive-quantized"
  int bits = 4;
  int64_t group_size = -1;  // strategy "group" only
  std::string strategy;     // "group", "channel" or "tensor"
  bool symmetric = true;
  bool input_activations = false;  // W8A8: int8 activations per token (ours are per 32-block)
};

struct QuantizationConfig {
  QuantMethod method = QuantMethod::kGptq;
  std::string origin;  // the file it was read from, for error messages
  // GPTQ and AWQ.
  int bits = 4;
  int64_t group_size = 128;  // -1: one group per output row (per channel)
  bool desc_act = false;     // GPTQ: g_idx assigns columns to groups in activation order
  bool sym = true;
  // GPTQ checkpoint_format "gptq" (AutoGPTQ's v1: each stored zero-point is zero - 1, written by
  // subtracting 0x11111111 from the packed word) or "gptq_v2" (gptqmodel's: stored as is).
  bool gptq_v1_zeros = true;
  // compressed-tensors: the top-level format (a group's own wins; "mixed-precision": per group).
  std::string format;
  std::vector<CompressedTensorsScheme> schemes;
};

// Reads `config` (config.json's text, from `origin`) and, when it has none, quantize_config.json
// from `dir`. nullopt for an unquantized checkpoint; an Error naming the file and field for a
// malformed or unsupported one.
Result<std::optional<QuantizationConfig>> parse_quantization_config(const std::string& config,
                                                                    const std::string& origin,
                                                                    const std::string& dir);

// The folder's config.json (and quantize_config.json), as above.
Result<std::optional<QuantizationConfig>> read_quantization_config(const std::string& dir);

// TGI's --quantize against what the checkpoint is: OK when `flag` names the checkpoint's method
// (`marlin`, a GPU kernel for GPTQ/AWQ weights, names either), else an Error saying why.
Status check_quantize_flag(const std::string& flag, const std::optional<QuantizationConfig>& q);

}  // namespace lm
