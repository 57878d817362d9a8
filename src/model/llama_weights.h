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
  Tensor gate_proj;  // [intermediate_size, hidden_size]
  Tensor up_proj;    // [intermediate_size, hidden_size]
  Tensor down_proj;  // [hidden_size, intermediate_size]
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
