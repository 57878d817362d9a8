// The named weights of a Llama-family model, bound by name from a WeightStore (HF or GGUF
// names) with every shape and dtype checked once at load. Large matrices stay views into the
// mapped files in their stored format; norms and biases are small and kept as fp32 copies (Gemma's
// norm weights, stored as offsets from 1 in HF files, as the 1 + w that multiplies).
#pragma once

#include <vector>

#include "base/result.h"
#include "loader/weight_store.h"
#include "model/model_config.h"
#include "tensor/tensor.h"

namespace lm {

// A gated MLP's three matrices: down(act(gate(x)) * up(x)).
struct MlpWeights {
  Tensor gate_proj;  // [intermediate, hidden_size]
  Tensor up_proj;    // [intermediate, hidden_size]
  Tensor down_proj;  // [hidden_size, intermediate]
};

// A sparse MoE block (model_config.h MoeConfig): the router and the experts, each expert's
// matrices views into the stored tensors (per-expert HF tensors, or slices of GGUF's stacked
// [num_experts, rows, cols] ones).
struct MoeWeights {
  Tensor router;                    // [num_experts, hidden_size]
  std::vector<MlpWeights> experts;  // [num_experts], expert_intermediate_size wide
  MlpWeights shared_expert;         // Qwen2-MoE, shared_expert_intermediate_size wide; else empty
  std::vector<float> shared_expert_gate;  // [hidden_size] with the shared expert
};

struct LlamaLayerWeights {
  std::vector<float> input_layernorm;         // [hidden_size]
  Tensor q_proj;                              // [num_heads * head_dim, hidden_size]
  Tensor k_proj;                              // [num_kv_heads * head_dim, hidden_size]
  Tensor v_proj;                              // [num_kv_heads * head_dim, hidden_size]
  Tensor o_proj;                              // [hidden_size, num_heads * head_dim]
  std::vector<float> q_bias, k_bias, v_bias;  // [out_features] when attention_bias (Qwen2)
  std::vector<float> q_norm, k_norm;          // [head_dim] when qk_norm (Qwen3)
  // [hidden_size] the norm before the MLP (HF: post_attention_layernorm, Gemma 2/3:
  // pre_feedforward_layernorm).
  std::vector<float> post_attention_layernorm;
  // [hidden_size] when sandwich_norms (Gemma 2/3): the norms of the attention output (HF's
  // post_attention_layernorm there) and of the MLP output (post_feedforward_layernorm).
  std::vector<float> attn_output_norm, mlp_output_norm;
  // The dense MLP (empty in sparse layers, which have `moe` instead).
  Tensor gate_proj;  // [intermediate_size, hidden_size]
  Tensor up_proj;    // [intermediate_size, hidden_size]
  Tensor down_proj;  // [hidden_size, intermediate_size]
  MoeWeights moe;    // sparse layers (ModelConfig::is_sparse_layer) only
  // The checkpoint's FP8 KV cache scales (TGI's get_kv_scales: self_attn.k_scale and v_scale,
  // else self_attn.kv_scale for both; 1 when absent). An FP8 cache holds K / k_scale and
  // V / v_scale; other caches ignore them, as TGI and vLLM do.
  float k_scale = 1.0f, v_scale = 1.0f;
  bool has_kv_scales = false;

  // Every Linear weight of the layer (the attention's, the dense MLP's or the router's and every
  // expert's), for passes that convert or repack them all.
  std::vector<Tensor*> linears();
  std::vector<const Tensor*> linears() const;
};

struct LlamaWeights {
  Tensor embed_tokens;  // [vocab_size, hidden_size]
  std::vector<LlamaLayerWeights> layers;
  std::vector<float> norm;               // [hidden_size]
  Tensor lm_head;                        // [vocab_size, hidden_size]; embed_tokens when tied
  std::vector<float> rope_freq_factors;  // [head_dim / 2], GGUF llama3 models only
};

enum class WeightNaming { kHuggingFace, kGguf };

Result<LlamaWeights> bind_llama_weights(const ModelConfig& config, const WeightStore& store,
                                        WeightNaming naming);

}  // namespace lm
