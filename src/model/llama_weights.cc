#include "model/llama_weights.h"

#include <cmath>

#include "ops/linear.h"

namespace lm {
namespace {

// Looks up tensors by their names in one naming scheme and checks shape and dtype.
class Binder {
 public:
  Binder(const WeightStore& store, WeightNaming naming) : store_(store), naming_(naming) {}

  std::string name(const std::string& hf, const std::string& gguf) const {
    return naming_ == WeightNaming::kHuggingFace ? hf : gguf;
  }

  Result<Tensor> matrix(const std::string& name, int64_t rows, int64_t cols) const {
    LM_ASSIGN_OR_RETURN(Tensor t, find(name, Shape{rows, cols}));
    if (!ops::supports_weight(t)) {
      return Error{store_.origin() + ": tensor '" + name + "' has type " +
                   std::string(dtype_name(t.dtype)) +
                   ", which the CPU kernels cannot compute yet (supported: F32, F16, BF16, Q8_0, "
                   "Q4_0, Q4_1)"};
    }
    return t;
  }

  Result<std::vector<float>> vector(const std::string& name, int64_t n) const {
    LM_ASSIGN_OR_RETURN(Tensor t, find(name, Shape{n}));
    if (!ops::supports_weight_dtype(t.dtype)) {
      return Error{store_.origin() + ": tensor '" + name + "' has unsupported type " +
                   std::string(dtype_name(t.dtype))};
    }
    return ops::to_f32(t);
  }

  // A GGUF stack of per-expert matrices, [num_experts, rows, cols].
  Result<Tensor> stacked(const std::string& name, int64_t num_experts, int64_t rows,
                         int64_t cols) const {
    LM_ASSIGN_OR_RETURN(Tensor t, find(name, Shape{num_experts, rows, cols}));
    if (!ops::supports_weight_dtype(t.dtype)) {
      return Error{store_.origin() + ": tensor '" + name + "' has type " +
                   std::string(dtype_name(t.dtype)) + ", which the CPU kernels cannot compute yet"};
    }
    return t;
  }

  // A vector stored as [n] (GGUF) or as a one-row matrix [1, n] (an HF Linear with one output).
  Result<std::vector<float>> row_vector(const std::string& name, int64_t n) const {
    const Tensor* t = store_.find(name);
    if (t != nullptr && t->shape == Shape{1, n}) {
      Tensor flat = *t;
      flat.shape = {n};
      return ops::to_f32(flat);
    }
    return vector(name, n);
  }

  bool has(const std::string& name) const { return store_.find(name) != nullptr; }

  // A positive, finite scale stored as [] or [1] (F32, F16 or BF16).
  Result<float> scale(const std::string& name) const {
    const Tensor* t = store_.find(name);
    if (t == nullptr) return Error{store_.origin() + ": tensor '" + name + "' is missing"};
    if (t->numel() != 1 || t->rank() > 1 ||
        (t->dtype != DType::kF32 && t->dtype != DType::kF16 && t->dtype != DType::kBF16)) {
      return Error{store_.origin() + ": tensor '" + name +
                   "' must be one F32/F16/BF16 value, not " + std::string(dtype_name(t->dtype)) +
                   " " + shape_string(t->shape)};
    }
    Tensor flat = *t;
    flat.shape = {1};
    const float v = ops::to_f32(flat)[0];
    if (!(v > 0.0f) || !std::isfinite(v))
      return Error{store_.origin() + ": tensor '" + name + "' is " + std::to_string(v) +
                   ": a KV cache scale must be positive and finite"};
    return v;
  }

 private:
  Result<Tensor> find(const std::string& name, const Shape& expected) const {
    const Tensor* t = store_.find(name);
    if (t == nullptr) return Error{store_.origin() + ": tensor '" + name + "' is missing"};
    // GGUF stores 1-D norms as [n]; some HF exports add no extra dims; both must match exactly.
    if (t->shape != expected) {
      return Error{store_.origin() + ": tensor '" + name + "' has shape " + shape_string(t->shape) +
                   ", expected " + shape_string(expected)};
    }
    return *t;
  }

  const WeightStore& store_;
  WeightNaming naming_;
};

// Rows [first, first + rows) of a [*, cols] matrix in any row format: a view, no copy.
Tensor row_slice(const Tensor& t, int64_t first, int64_t rows) {
  Tensor view = t;
  view.shape = {rows, t.dim(1)};
  view.data = static_cast<uint8_t*>(t.data) + first * t.row_bytes();
  return view;
}

// Expert e's [rows, cols] matrix of a [num_experts, rows, cols] stack: a view, no copy.
Tensor expert_slice(const Tensor& stack, int64_t e) {
  Tensor view = stack;
  view.shape = {stack.dim(1), stack.dim(2)};
  view.data = static_cast<uint8_t*>(stack.data) + e * stack.dim(1) * stack.row_bytes();
  return view;
}

// The router, experts and shared expert of sparse layer `i` in HF's per-expert tensors (Mixtral:
// block_sparse_moe.experts.E.w1/w3/w2 = gate/up/down; Qwen: mlp.experts.E.gate/up/down_proj) or
// GGUF's stacks (ffn_{gate,up,down}_exps, the shared expert's ffn_*_shexp).
Result<MoeWeights> bind_moe(const ModelConfig& c, const Binder& b, WeightNaming naming, int64_t i) {
  const MoeConfig& m = c.moe;
  const int64_t hidden = c.hidden_size, inter = m.expert_intermediate_size;
  const bool mixtral = c.architecture == Architecture::kMixtral;
  const std::string hf =
      "model.layers." + std::to_string(i) + (mixtral ? ".block_sparse_moe." : ".mlp.");
  const std::string gg = "blk." + std::to_string(i) + ".";
  MoeWeights w;
  LM_ASSIGN_OR_RETURN(w.router, b.matrix(b.name(hf + "gate.weight", gg + "ffn_gate_inp.weight"),
                                         m.num_experts, hidden));
  if (naming == WeightNaming::kGguf) {
    LM_ASSIGN_OR_RETURN(const Tensor gate,
                        b.stacked(gg + "ffn_gate_exps.weight", m.num_experts, inter, hidden));
    LM_ASSIGN_OR_RETURN(const Tensor up,
                        b.stacked(gg + "ffn_up_exps.weight", m.num_experts, inter, hidden));
    LM_ASSIGN_OR_RETURN(const Tensor down,
                        b.stacked(gg + "ffn_down_exps.weight", m.num_experts, hidden, inter));
    for (int64_t e = 0; e < m.num_experts; ++e)
      w.experts.push_back({expert_slice(gate, e), expert_slice(up, e), expert_slice(down, e)});
  } else {
    for (int64_t e = 0; e < m.num_experts; ++e) {
      const std::string x = hf + "experts." + std::to_string(e) + ".";
      MlpWeights expert;
      LM_ASSIGN_OR_RETURN(
          expert.gate_proj,
          b.matrix(x + (mixtral ? "w1.weight" : "gate_proj.weight"), inter, hidden));
      LM_ASSIGN_OR_RETURN(expert.up_proj,
                          b.matrix(x + (mixtral ? "w3.weight" : "up_proj.weight"), inter, hidden));
      LM_ASSIGN_OR_RETURN(
          expert.down_proj,
          b.matrix(x + (mixtral ? "w2.weight" : "down_proj.weight"), hidden, inter));
      w.experts.push_back(std::move(expert));
    }
  }
  if (const int64_t shared = m.shared_expert_intermediate_size; shared > 0) {
    const std::string x = hf + "shared_expert.";
    LM_ASSIGN_OR_RETURN(
        w.shared_expert.gate_proj,
        b.matrix(b.name(x + "gate_proj.weight", gg + "ffn_gate_shexp.weight"), shared, hidden));
    LM_ASSIGN_OR_RETURN(
        w.shared_expert.up_proj,
        b.matrix(b.name(x + "up_proj.weight", gg + "ffn_up_shexp.weight"), shared, hidden));
    LM_ASSIGN_OR_RETURN(
        w.shared_expert.down_proj,
        b.matrix(b.name(x + "down_proj.weight", gg + "ffn_down_shexp.weight"), hidden, shared));
    LM_ASSIGN_OR_RETURN(w.shared_expert_gate, b.row_vector(b.name(hf + "shared_expert_gate.weight",
                                                                  gg + "ffn_gate_inp_shexp.weight"),
                                                           hidden));
  }
  return w;
}

}  // namespace

namespace {

// LlamaLayerWeights::linears for a const or mutable layer: the pointers follow its constness.
template <typename Layer>
auto linears_of(Layer& l) {
  std::vector<decltype(&l.q_proj)> out;
  for (auto* t : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj,
                  &l.down_proj, &l.moe.router, &l.moe.shared_expert.gate_proj,
                  &l.moe.shared_expert.up_proj, &l.moe.shared_expert.down_proj})
    if (!t->empty()) out.push_back(t);
  for (auto& e : l.moe.experts)
    for (auto* t : {&e.gate_proj, &e.up_proj, &e.down_proj}) out.push_back(t);
  return out;
}

}  // namespace

std::vector<Tensor*> LlamaLayerWeights::linears() { return linears_of(*this); }
std::vector<const Tensor*> LlamaLayerWeights::linears() const { return linears_of(*this); }

Result<LlamaWeights> bind_llama_weights(const ModelConfig& c, const WeightStore& store,
                                        WeightNaming naming) {
  Binder b(store, naming);
  LlamaWeights w;
  // HF Gemma norms multiply by 1 + w (in fp32); llama.cpp's converter wrote 1 + w into GGUFs.
  const bool offset_norms = c.gemma_scaling && naming == WeightNaming::kHuggingFace;
  const auto norm = [&](const std::string& name, int64_t n) -> Result<std::vector<float>> {
    LM_ASSIGN_OR_RETURN(std::vector<float> v, b.vector(name, n));
    if (offset_norms)
      for (float& x : v) x = 1.0f + x;
    return v;
  };
  const int64_t hidden = c.hidden_size, q_dim = c.num_attention_heads * c.head_dim,
                kv_dim = c.num_key_value_heads * c.head_dim, inter = c.intermediate_size;
  LM_ASSIGN_OR_RETURN(
      w.embed_tokens,
      b.matrix(b.name("model.embed_tokens.weight", "token_embd.weight"), c.vocab_size, hidden));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string hf = "model.layers." + std::to_string(i) + ".";
    const std::string gg = "blk." + std::to_string(i) + ".";
    LlamaLayerWeights l;
    LM_ASSIGN_OR_RETURN(
        l.input_layernorm,
        norm(b.name(hf + "input_layernorm.weight", gg + "attn_norm.weight"), hidden));
    if (c.fused_projections) {
      // Phi-3: one [q | k | v] matrix; its rows are the three projections back to back.
      LM_ASSIGN_OR_RETURN(const Tensor qkv,
                          b.matrix(b.name(hf + "self_attn.qkv_proj.weight", gg + "attn_qkv.weight"),
                                   q_dim + 2 * kv_dim, hidden));
      l.q_proj = row_slice(qkv, 0, q_dim);
      l.k_proj = row_slice(qkv, q_dim, kv_dim);
      l.v_proj = row_slice(qkv, q_dim + kv_dim, kv_dim);
    } else {
      LM_ASSIGN_OR_RETURN(
          l.q_proj,
          b.matrix(b.name(hf + "self_attn.q_proj.weight", gg + "attn_q.weight"), q_dim, hidden));
      LM_ASSIGN_OR_RETURN(
          l.k_proj,
          b.matrix(b.name(hf + "self_attn.k_proj.weight", gg + "attn_k.weight"), kv_dim, hidden));
      LM_ASSIGN_OR_RETURN(
          l.v_proj,
          b.matrix(b.name(hf + "self_attn.v_proj.weight", gg + "attn_v.weight"), kv_dim, hidden));
    }
    LM_ASSIGN_OR_RETURN(
        l.o_proj,
        b.matrix(b.name(hf + "self_attn.o_proj.weight", gg + "attn_output.weight"), hidden, q_dim));
    if (c.attention_bias) {
      LM_ASSIGN_OR_RETURN(
          l.q_bias, b.vector(b.name(hf + "self_attn.q_proj.bias", gg + "attn_q.bias"), q_dim));
      LM_ASSIGN_OR_RETURN(
          l.k_bias, b.vector(b.name(hf + "self_attn.k_proj.bias", gg + "attn_k.bias"), kv_dim));
      LM_ASSIGN_OR_RETURN(
          l.v_bias, b.vector(b.name(hf + "self_attn.v_proj.bias", gg + "attn_v.bias"), kv_dim));
    }
    if (c.qk_norm) {
      LM_ASSIGN_OR_RETURN(
          l.q_norm,
          norm(b.name(hf + "self_attn.q_norm.weight", gg + "attn_q_norm.weight"), c.head_dim));
      LM_ASSIGN_OR_RETURN(
          l.k_norm,
          norm(b.name(hf + "self_attn.k_norm.weight", gg + "attn_k_norm.weight"), c.head_dim));
    }
    if (naming == WeightNaming::kHuggingFace) {
      const std::string attn = hf + "self_attn.";
      if (b.has(attn + "k_scale") && b.has(attn + "v_scale")) {
        LM_ASSIGN_OR_RETURN(l.k_scale, b.scale(attn + "k_scale"));
        LM_ASSIGN_OR_RETURN(l.v_scale, b.scale(attn + "v_scale"));
        l.has_kv_scales = true;
      } else if (b.has(attn + "kv_scale")) {
        LM_ASSIGN_OR_RETURN(l.k_scale, b.scale(attn + "kv_scale"));
        l.v_scale = l.k_scale;
        l.has_kv_scales = true;
      }
    }
    if (c.sandwich_norms) {
      LM_ASSIGN_OR_RETURN(l.attn_output_norm, norm(b.name(hf + "post_attention_layernorm.weight",
                                                          gg + "post_attention_norm.weight"),
                                                   hidden));
      LM_ASSIGN_OR_RETURN(
          l.post_attention_layernorm,
          norm(b.name(hf + "pre_feedforward_layernorm.weight", gg + "ffn_norm.weight"), hidden));
      LM_ASSIGN_OR_RETURN(l.mlp_output_norm, norm(b.name(hf + "post_feedforward_layernorm.weight",
                                                         gg + "post_ffw_norm.weight"),
                                                  hidden));
    } else {
      LM_ASSIGN_OR_RETURN(
          l.post_attention_layernorm,
          norm(b.name(hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight"), hidden));
    }
    if (c.is_sparse_layer(i)) {
      LM_ASSIGN_OR_RETURN(l.moe, bind_moe(c, b, naming, i));
    } else if (c.fused_projections) {
      // Phi-3: gate_up_proj's first half of rows is the gate, the second the up projection. The
      // converter stores it unchanged as ffn_up, and llama.cpp's swiglu takes silu of the first
      // half: the same order.
      LM_ASSIGN_OR_RETURN(const Tensor gate_up,
                          b.matrix(b.name(hf + "mlp.gate_up_proj.weight", gg + "ffn_up.weight"),
                                   2 * inter, hidden));
      l.gate_proj = row_slice(gate_up, 0, inter);
      l.up_proj = row_slice(gate_up, inter, inter);
    } else {
      LM_ASSIGN_OR_RETURN(
          l.gate_proj,
          b.matrix(b.name(hf + "mlp.gate_proj.weight", gg + "ffn_gate.weight"), inter, hidden));
      LM_ASSIGN_OR_RETURN(
          l.up_proj,
          b.matrix(b.name(hf + "mlp.up_proj.weight", gg + "ffn_up.weight"), inter, hidden));
    }
    if (!c.is_sparse_layer(i)) {
      LM_ASSIGN_OR_RETURN(
          l.down_proj,
          b.matrix(b.name(hf + "mlp.down_proj.weight", gg + "ffn_down.weight"), hidden, inter));
    }
    w.layers.push_back(std::move(l));
  }
  LM_ASSIGN_OR_RETURN(w.norm, norm(b.name("model.norm.weight", "output_norm.weight"), hidden));
  const std::string head_name = b.name("lm_head.weight", "output.weight");
  if (b.has(head_name)) {
    LM_ASSIGN_OR_RETURN(w.lm_head, b.matrix(head_name, c.vocab_size, hidden));
  } else if (c.tie_word_embeddings || naming == WeightNaming::kGguf) {
    w.lm_head = w.embed_tokens;
  } else {
    return Error{store.origin() + ": tensor '" + head_name +
                 "' is missing (and tie_word_embeddings is false)"};
  }
  if (naming == WeightNaming::kGguf && b.has("rope_freqs.weight")) {
    LM_ASSIGN_OR_RETURN(w.rope_freq_factors, b.vector("rope_freqs.weight", c.head_dim / 2));
  }
  return w;
}

}  // namespace lm
