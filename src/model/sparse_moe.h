// The sparse mixture-of-experts block on the CPU (Mixtral, Qwen2-MoE, Qwen3-MoE). The tokens of a
// step are grouped by expert, and each expert runs once over all the tokens routed to it, so its
// weights stream from memory once per step however many tokens chose it (not once per token).
// Each token's weighted expert outputs are summed in increasing expert order, as transformers'
// index_add does, so a token's result does not depend on what else is in the batch.
#pragma once

#include "base/thread_pool.h"
#include "model/llama_weights.h"
#include "model/model_config.h"
#include "tensor/tensor.h"

namespace lm {

class SparseMoe {
 public:
  // out[n, hidden] = the MoE block of x[n, hidden] (out must not alias x). The experts are
  // SwiGLU MLPs; int8_activations as LlamaModel's Linears.
  void forward(const MoeConfig& config, const MoeWeights& weights, const Tensor& x, Tensor& out,
               ThreadPool& pool, bool int8_activations);

  // fp32 workspace bytes per token of a step (router logits, gathered rows, expert activations).
  static int64_t workspace_bytes_per_token(const MoeConfig& config, int64_t hidden_size);

 private:
  void resize(const MoeConfig& config, int64_t num_tokens, int64_t hidden_size);
  // out[rows] = down(silu(gate(x)) * up(x)) for the first x.dim(0) rows of the workspace.
  void mlp(const MlpWeights& w, const Tensor& x, Tensor& out, ThreadPool& pool, bool int8);

  int64_t num_tokens_ = 0;
  Buffer router_logits_;  // [n, num_experts]
  Buffer rows_in_;        // [n, hidden] the tokens routed to one expert, gathered
  Buffer gate_, up_;      // [n, max(expert, shared expert) intermediate]
  Buffer rows_out_;       // [n, hidden] that expert's outputs
};

}  // namespace lm
