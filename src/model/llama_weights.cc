#include "model/llama_weights.h"

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
    if (!ops::supports_weight_dtype(t.dtype)) {
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

  bool has(const std::string& name) const { return store_.find(name) != nullptr; }

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

}  // namespace

Result<LlamaWeights> bind_llama_weights(const ModelConfig& c, const WeightStore& store,
                                        WeightNaming naming) {
  Binder b(store, naming);
  LlamaWeights w;
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
        b.vector(b.name(hf + "input_layernorm.weight", gg + "attn_norm.weight"), hidden));
    LM_ASSIGN_OR_RETURN(
        l.q_proj,
        b.matrix(b.name(hf + "self_attn.q_proj.weight", gg + "attn_q.weight"), q_dim, hidden));
    LM_ASSIGN_OR_RETURN(
        l.k_proj,
        b.matrix(b.name(hf + "self_attn.k_proj.weight", gg + "attn_k.weight"), kv_dim, hidden));
    LM_ASSIGN_OR_RETURN(
        l.v_proj,
        b.matrix(b.name(hf + "self_attn.v_proj.weight", gg + "attn_v.weight"), kv_dim, hidden));
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
    LM_ASSIGN_OR_RETURN(
        l.post_attention_layernorm,
        b.vector(b.name(hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight"), hidden));
    LM_ASSIGN_OR_RETURN(
        l.gate_proj,
        b.matrix(b.name(hf + "mlp.gate_proj.weight", gg + "ffn_gate.weight"), inter, hidden));
    LM_ASSIGN_OR_RETURN(l.up_proj, b.matrix(b.name(hf + "mlp.up_proj.weight", gg + "ffn_up.weight"),
                                            inter, hidden));
    LM_ASSIGN_OR_RETURN(
        l.down_proj,
        b.matrix(b.name(hf + "mlp.down_proj.weight", gg + "ffn_down.weight"), hidden, inter));
    w.layers.push_back(std::move(l));
  }
  LM_ASSIGN_OR_RETURN(w.norm, b.vector(b.name("model.norm.weight", "output_norm.weight"), hidden));
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
