#include "model/llama_model.h"

#include <sys/stat.h>

#include <cstring>

#include "loader/gguf_file.h"
#include "model/rope_frequencies.h"
#include "ops/layers.h"
#include "ops/linear.h"

namespace lm {
namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A [rows, cols] view starting at row `first` of a 2-D tensor.
Tensor rows_of(const Tensor& t, int64_t first, int64_t rows) {
  return Tensor{t.dtype, {rows, t.dim(1)}, t.as<float>() + first * t.dim(1), t.device};
}

Tensor bias_view(const std::vector<float>& b) {
  if (b.empty()) return {};
  return Tensor{
      DType::kF32, {static_cast<int64_t>(b.size())}, const_cast<float*>(b.data()), Device::kCpu};
}

}  // namespace

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const std::string& path) {
  std::unique_ptr<LlamaModel> model(new LlamaModel());
  WeightNaming naming;
  if (is_directory(path)) {
    LM_ASSIGN_OR_RETURN(model->config_, load_hf_config(path));
    LM_ASSIGN_OR_RETURN(model->store_, WeightStore::from_hf_folder(path));
    naming = WeightNaming::kHuggingFace;
  } else {
    LM_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::open(path));
    model->gguf_ = std::make_shared<const GgufFile>(std::move(gguf));
    LM_ASSIGN_OR_RETURN(model->config_, config_from_gguf(*model->gguf_));
    model->store_ = WeightStore::from_gguf(model->gguf_);
    naming = WeightNaming::kGguf;
  }
  LM_ASSIGN_OR_RETURN(model->weights_, bind_llama_weights(model->config_, model->store_, naming));
  return model;
}

void LlamaModel::resize_workspace(int64_t n) {
  if (ws_.num_tokens >= n) return;
  const ModelConfig& c = config_;
  ws_.num_tokens = n;
  ws_.x = Buffer({n, c.hidden_size});
  ws_.normed = Buffer({n, c.hidden_size});
  ws_.q = Buffer({n, c.num_attention_heads * c.head_dim});
  ws_.attn = Buffer({n, c.num_attention_heads * c.head_dim});
  ws_.gate = Buffer({n, c.intermediate_size});
  ws_.up = Buffer({n, c.intermediate_size});
}

void LlamaModel::forward(std::span<const int32_t> token_ids, int64_t first_position,
                         KvCacheView& kv, bool all_logits, std::vector<float>& logits,
                         ThreadPool& pool) {
  const ModelConfig& c = config_;
  const auto n = static_cast<int64_t>(token_ids.size());
  LM_CHECK(n > 0 && first_position >= 0 && first_position + n <= kv.capacity());
  LM_CHECK(static_cast<int64_t>(kv.k.size()) == c.num_hidden_layers);
  resize_workspace(n);
  Tensor x = rows_of(ws_.x.view(), 0, n);            // [n, hidden] residual stream
  Tensor normed = rows_of(ws_.normed.view(), 0, n);  // [n, hidden]
  Tensor q = rows_of(ws_.q.view(), 0, n);            // [n, heads * head_dim]
  Tensor attn = rows_of(ws_.attn.view(), 0, n);      // [n, heads * head_dim]
  Tensor gate = rows_of(ws_.gate.view(), 0, n);      // [n, intermediate]
  Tensor up = rows_of(ws_.up.view(), 0, n);          // [n, intermediate]

  std::vector<int32_t> positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    positions[static_cast<size_t>(i)] = static_cast<int32_t>(first_position + i);
  const RopeFrequencies rope = rope_frequencies(c, first_position + n, weights_.rope_freq_factors);
  const auto rope_mode =
      c.rope.layout == RopeLayout::kNeox ? ops::RopeMode::kNeox : ops::RopeMode::kInterleaved;
  const auto eps = static_cast<float>(c.rms_norm_eps);

  ops::embedding(weights_.embed_tokens, token_ids.data(), n, x);
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const LlamaLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
    Tensor k =
        rows_of(kv.k[static_cast<size_t>(layer)], first_position, n);  // [n, kv_heads * head_dim]
    Tensor v = rows_of(kv.v[static_cast<size_t>(layer)], first_position, n);

    // Attention block: new K/V go straight into the cache rows of their positions.
    ops::rms_norm(x, w.input_layernorm.data(), normed, eps);
    ops::linear(normed, w.q_proj, bias_view(w.q_bias), q, pool);
    ops::linear(normed, w.k_proj, bias_view(w.k_bias), k, pool);
    ops::linear(normed, w.v_proj, bias_view(w.v_bias), v, pool);
    ops::rope(q, c.head_dim, positions.data(), rope.inv_freq.data(), rope_mode,
              rope.attention_scaling);
    ops::rope(k, c.head_dim, positions.data(), rope.inv_freq.data(), rope_mode,
              rope.attention_scaling);
    ops::attention(q, kv.k[static_cast<size_t>(layer)], kv.v[static_cast<size_t>(layer)], attn,
                   c.head_dim, first_position, pool);
    ops::linear(attn, w.o_proj, {}, normed, pool);
    ops::add(x, normed);

    // MLP block: down(silu(gate(x)) * up(x)).
    ops::rms_norm(x, w.post_attention_layernorm.data(), normed, eps);
    ops::linear(normed, w.gate_proj, {}, gate, pool);
    ops::linear(normed, w.up_proj, {}, up, pool);
    ops::silu_mul(gate, up);
    ops::linear(gate, w.down_proj, {}, normed, pool);
    ops::add(x, normed);
  }

  const int64_t rows = all_logits ? n : 1;
  Tensor final_rows = rows_of(x, n - rows, rows);
  Tensor final_normed = rows_of(normed, 0, rows);
  ops::rms_norm(final_rows, weights_.norm.data(), final_normed, eps);
  logits.resize(static_cast<size_t>(rows * c.vocab_size));
  Tensor out{DType::kF32, {rows, c.vocab_size}, logits.data(), Device::kCpu};
  ops::linear(final_normed, weights_.lm_head, {}, out, pool);
}

}  // namespace lm
