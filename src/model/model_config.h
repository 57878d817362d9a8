// ModelConfig: the dimensions and options of a Llama-family model, parsed once from config.json
// (+ generation_config.json) or GGUF metadata, validated, then immutable.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace lm {

class GgufFile;

enum class Architecture {
  kLlama,
  kMistral,
  kMixtral,
  kQwen2,
  kQwen2Moe,
  kQwen3,
  kQwen3Moe,
  kGemma,
  kGemma2,
  kGemma3,
  kPhi3
};

// The gate's activation in the gated MLP: SwiGLU (Llama) or GeGLU with tanh-approximated GELU
// (Gemma's gelu_pytorch_tanh).
enum class MlpActivation { kSilu, kGeluTanh };

enum class RopeType { kDefault, kLinear, kDynamic, kLlama3, kLongRope, kYarn };

// How Q/K weight rows pair up dimensions for RoPE. HF checkpoints use rotate_half (NeoX style);
// llama.cpp's converter permutes Llama Q/K rows so pairs are adjacent (interleaved).
enum class RopeLayout { kNeox, kInterleaved };

struct RopeConfig {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;
  double factor = 1.0;
  double low_freq_factor = 1.0;                  // llama3
  double high_freq_factor = 4.0;                 // llama3
  int64_t original_max_position_embeddings = 0;  // llama3, longrope, yarn (dynamic when given)
  // longrope (Phi-3 "su"): per-frequency divisors, the long ones once a forward reaches past
  // original_max_position_embeddings; cos/sin scaled by attention_factor (derived when unset).
  std::vector<double> short_factor, long_factor;
  std::optional<double> attention_factor;  // longrope, yarn
  // yarn: frequencies turning more than beta_fast times over the trained length keep their
  // value, fewer than beta_slow times are divided by factor, a linear ramp between (its ends
  // rounded outwards when truncate); attention factor from mscale / mscale_all_dim (0: unset).
  double beta_fast = 32.0, beta_slow = 1.0;
  double mscale = 0, mscale_all_dim = 0;
  bool truncate = true;
  RopeLayout layout = RopeLayout::kNeox;

  // Dynamic NTK and LongRoPE rotate a sequence's keys by factors that depend on how long it gets
  // in the forward that computes them: cached K/V is not what another request (prefix caching),
  // a forward of several verified rows (speculation) or a fixed-shape graph would compute.
  bool depends_on_length() const {
    return type == RopeType::kDynamic || type == RopeType::kLongRope;
  }
};

// A sparse mixture of experts in place of the MLP (Mixtral, Qwen2-MoE, Qwen3-MoE): a router
// picks num_experts_per_tok of num_experts SwiGLU experts per token and sums their outputs
// weighted by the softmax of its logits over all experts, renormalized over the chosen ones when
// norm_topk_prob; Qwen2-MoE adds a shared expert gated by sigmoid(x . shared_expert_gate).
struct MoeConfig {
  int64_t num_experts = 0;  // 0: every layer has the dense MLP
  int64_t num_experts_per_tok = 0;
  int64_t expert_intermediate_size = 0;         // each expert's MLP width
  int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  bool norm_topk_prob = true;
  // Per layer: true where the MoE block replaces the dense MLP (Qwen's decoder_sparse_step and
  // mlp_only_layers leave some layers dense).
  std::vector<bool> sparse_layers;
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
  // The leading elements of each head RoPE rotates; 0 for all (Phi-4-mini: 3/4 of them).
  int64_t rotary_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  // q/k/v stored as one qkv_proj matrix and gate/up as one gate_up_proj (Phi-3).
  bool fused_projections = false;
  bool qk_norm = false;  // RMSNorm over each head of q and k before RoPE (Qwen3, Gemma3)
  MlpActivation mlp_activation = MlpActivation::kSilu;
  // Gemma: the embedding rows are multiplied by sqrt(hidden_size), and the norm weights are
  // stored as offsets from 1 (HF computes x_normed * (1 + w)).
  bool gemma_scaling = false;
  // Gemma 2/3: the attention and MLP outputs are normed too before they join the residual.
  bool sandwich_norms = false;
  // Attention scores are q.k / sqrt(query_pre_attn_scalar) (Gemma 2/3), else / sqrt(head_dim).
  std::optional<double> query_pre_attn_scalar;
  double final_logit_softcapping = 0;  // logits = c * tanh(logits / c) when > 0 (Gemma 2)
  double attn_logit_softcapping = 0;   // attention scores likewise (Gemma 2)
  // RoPE of the sliding-window layers when it differs from `rope` (Gemma 3's local base).
  std::optional<RopeConfig> local_rope;
  // Per layer: 0 where it attends to every earlier position, else its sliding window w (a token
  // at position p sees [p - w + 1, p]), as transformers' layer_types decide.
  std::vector<int64_t> layer_sliding_windows;
  MoeConfig moe;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;  // generation_config's list when it has one

  int64_t rotary_dims() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  const RopeConfig& rope_of(int64_t layer) const {
    return local_rope && sliding_window_of(layer) > 0 ? *local_rope : rope;
  }
  int64_t sliding_window_of(int64_t layer) const {
    return layer_sliding_windows.empty() ? 0 : layer_sliding_windows[static_cast<size_t>(layer)];
  }
  bool is_sparse_layer(int64_t layer) const {
    return !moe.sparse_layers.empty() && moe.sparse_layers[static_cast<size_t>(layer)];
  }
  // The longest sequence the model serves: max_position_embeddings, except with dynamic NTK
  // scaling, which rescales RoPE for whatever length it reaches (as HF does, no hard limit), and
  // with YaRN, the trained length times the factor (Qwen2.5's 128K setting keeps
  // max_position_embeddings at 32768 beside {"factor": 4, "original_max_position_embeddings":
  // 32768}), as vLLM derives its max_model_len.
  int64_t max_context() const {
    if (rope.type == RopeType::kDynamic) return kUnboundedContext;
    if (rope.type == RopeType::kYarn) {
      const double scaled =
          static_cast<double>(rope.original_max_position_embeddings) * rope.factor;
      return std::max(max_position_embeddings,
                      static_cast<int64_t>(std::min(scaled, double{kUnboundedContext})));
    }
    return max_position_embeddings;
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
