// ModelConfig: the dimensions and options of a Llama-family model, parsed once from config.json
// (+ generation_config.json) or GGUF metadata, validated, then immutable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace lm {

class GgufFile;

enum class Architecture { kLlama, kMistral, kQwen2 };

enum class RopeType { kDefault, kLinear, kDynamic, kLlama3 };

// How Q/K weight rows pair up dimensions for RoPE. HF checkpoints use rotate_half (NeoX style);
// llama.cpp's converter permutes Llama Q/K rows so pairs are adjacent (interleaved).
enum class RopeLayout { kNeox, kInterleaved };

struct RopeConfig {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;
  double factor = 1.0;
  double low_freq_factor = 1.0;                  // llama3
  double high_freq_factor = 4.0;                 // llama3
  int64_t original_max_position_embeddings = 0;  // llama3 (and dynamic when given)
  RopeLayout layout = RopeLayout::kNeox;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string architecture_name;  // as written in the file, for messages
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  std::optional<int64_t> sliding_window;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;  // generation_config's list when it has one

  // The longest sequence the model serves: max_position_embeddings, except with dynamic NTK
  // scaling, which rescales RoPE for whatever length it reaches (as HF does, no hard limit).
  int64_t max_context() const {
    return rope.type == RopeType::kDynamic ? kUnboundedContext : max_position_embeddings;
  }
  static constexpr int64_t kUnboundedContext = int64_t{1} << 24;
};

// Reads dir/config.json and, when present, dir/generation_config.json.
Result<ModelConfig> load_hf_config(const std::string& dir);
// Parses config.json text; `origin` names the file in errors.
Result<ModelConfig> parse_hf_config(const std::string& config_json, const std::string& origin);
// Reads general.architecture and the <arch>.* metadata of a GGUF file.
Result<ModelConfig> config_from_gguf(const GgufFile& gguf);

std::string supported_architectures();

// TGI's --rope-scaling / --rope-factor: replaces the config's scaling, as TGI's shard sets
// config.rope_scaling = {"type": type, "factor": factor} (theta and the context length stay).
struct RopeScalingOverride {
  RopeType type = RopeType::kLinear;  // linear or dynamic
  double factor = 1.0;
};
void override_rope_scaling(ModelConfig& config, const RopeScalingOverride& rope);

}  // namespace lm
