// The `quantization_config` of a Hugging Face checkpoint (config.json, else AutoGPTQ's
// quantize_config.json): which pre-quantized format its Linear weights are stored in (GPTQ, AWQ,
// compressed-tensors, FP8) and with which parameters, read once and validated. Formats that are
// not built (Marlin-packed, 2/3-bit, FP4, ...) are refused here by name, before a tensor is read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace lm {

// kFp8: FP8 weights with their scales, as transformers' FineGrainedFP8 / AutoFP8 ("fp8") and
// FBGEMM ("fbgemm_fp8") write them.
enum class QuantMethod : uint8_t { kGptq, kAwq, kCompressedTensors, kFp8 };

// The method's name as config.json and TGI's --quantize spell it.
const char* quant_method_name(QuantMethod method);

// One compressed-tensors config group: the weights' quantization arguments and the modules it
// targets ("Linear", exact module names, or "re:<regex>" matched from the name's start).
struct CompressedTensorsScheme {
  std::vector<std::string> targets;
  std::string format;  // "pack-quantized", "int-quantized", "naive-quantized", "float-quantized"
  int bits = 4;
  bool float_weights = false;              // type "float": FP8 (E4M3) weights, 8 bits
  int64_t group_size = -1;                 // strategy "group" only
  std::string strategy;                    // "group", "channel", "tensor" (or "block": FP8 only)
  int64_t block_rows = 0, block_cols = 0;  // strategy "block": block_structure
  bool symmetric = true;
  // W8A8: activations quantized per token (int8, or FP8 for float weights). Ours: int8 per
  // 32-block with --int8-activations, else fp32.
  bool input_activations = false;
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
  // FP8: the method as config.json names it ("fp8" or "fbgemm_fp8") and transformers'
  // weight_block_size (0: the scale's shape says: one per tensor, or one per row).
  std::string fp8_method;
  int64_t fp8_block_rows = 0, fp8_block_cols = 0;
  // compressed-tensors' kv_cache_scheme: FP8 with one static K and one V scale per layer (the
  // tensors self_attn.k_scale / v_scale, which an FP8 KV cache applies).
  bool kv_cache_fp8_scales = false;

  // False for a compressed-tensors checkpoint whose only quantization is its KV cache (float
  // weights, no config group).
  bool quantizes_weights() const {
    return method != QuantMethod::kCompressedTensors || !schemes.empty();
  }
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
