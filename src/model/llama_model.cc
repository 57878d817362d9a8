#include "model/llama_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "loader/gguf_file.h"
#include "loader/quantization_config.h"
#include "model/rope_frequencies.h"
#include "ops/cpu_weights.h"
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

// x [rows, heads * head_dim] seen as [rows * heads, head_dim], for norms over each head.
Tensor per_head(const Tensor& x, int64_t head_dim) {
  return Tensor{x.dtype, {x.dim(0) * x.dim(1) / head_dim, head_dim}, x.data, x.device};
}

// x / s element by element (the checkpoint's KV scales divide, as vLLM's FP8 cache writes).
void divide_rows(Tensor& x, float s) {
  float* p = x.as<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) p[i] /= s;
}

Tensor bias_view(const std::vector<float>& b) {
  if (b.empty()) return {};
  return Tensor{
      DType::kF32, {static_cast<int64_t>(b.size())}, const_cast<float*>(b.data()), Device::kCpu};
}

// RoPE frequencies for a batch: one set shared by every row, except under dynamic NTK scaling,
// where each sequence's frequencies depend on how far that sequence reaches.
struct BatchRope {
  std::vector<RopeFrequencies> freqs;  // freqs[i] rotates rows [row_begins[i], row_begins[i + 1])
  std::vector<int32_t> row_begins;
  // Every row's cos and sin (ops::rope_cos_sin: [num_tokens, rotary_dim / 2]), computed once for
  // q, k and every layer.
  std::vector<float> cos, sin;
};

BatchRope batch_rope(const ModelConfig& c, const RopeConfig& config, const BatchInput& batch,
                     const std::vector<float>& freq_factors) {
  BatchRope rope;
  // Dynamic NTK and LongRoPE depend on how far each sequence reaches in this forward.
  if (!config.depends_on_length()) {
    rope.freqs.push_back(rope_frequencies(c, config, 0, freq_factors));
    rope.row_begins = {0, static_cast<int32_t>(batch.num_tokens())};
  } else {
    rope.row_begins.assign(batch.query_begins.begin(), batch.query_begins.end());
    for (int64_t s = 0; s < batch.num_seqs(); ++s) {
      const int32_t last_row = batch.query_begins[static_cast<size_t>(s) + 1] - 1;
      const int64_t length = batch.rope_lengths.empty()
                                 ? batch.positions[static_cast<size_t>(last_row)] + 1
                                 : batch.rope_lengths[static_cast<size_t>(s)];
      rope.freqs.push_back(rope_frequencies(c, config, length, freq_factors));
    }
  }
  const int64_t half = c.rotary_dims() / 2;
  rope.cos.resize(static_cast<size_t>(batch.num_tokens() * half));
  rope.sin.resize(rope.cos.size());
  for (size_t i = 0; i < rope.freqs.size(); ++i) {
    const int64_t begin = rope.row_begins[i], end = rope.row_begins[i + 1];
    ops::rope_cos_sin(batch.positions.data() + begin, end - begin, rope.freqs[i].inv_freq.data(),
                      half, rope.freqs[i].attention_scaling, rope.cos.data() + begin * half,
                      rope.sin.data() + begin * half);
  }
  return rope;
}

// True when w's data lies in `buffer`.
bool in_buffer(const Tensor& w, const Buffer& buffer) {
  const Tensor view = buffer.view();
  const auto* p = static_cast<const uint8_t*>(w.data);
  const auto* begin = static_cast<const uint8_t*>(view.data);
  return begin != nullptr && p >= begin && p < begin + view.numel() * 4;
}

}  // namespace

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const std::string& path,
                                                     const ModelLoadOptions& options) {
  std::unique_ptr<LlamaModel> model(new LlamaModel());
  WeightNaming naming;
  if (is_directory(path)) {
    LM_ASSIGN_OR_RETURN(model->config_, load_hf_config(path));
    LM_ASSIGN_OR_RETURN(auto quantization, read_quantization_config(path));
    // fp8 also names an FP8 checkpoint's format (TGI's manifests set it for those).
    const bool names_checkpoint = options.quantize && *options.quantize == "fp8" && quantization;
    if (options.quantize && load_quantization_dtype(*options.quantize) && !names_checkpoint) {
      // A checkpoint whose quantization_config quantizes only the KV cache (FP8 scales) has
      // float weights: they are quantized at load like any float checkpoint's.
      if (quantization && quantization->quantizes_weights()) {
        return Error{"--quantize " + *options.quantize + ": " + path + " is already quantized (" +
                     quant_method_name(quantization->method) +
                     "); quantizing at load applies to float checkpoints: drop --quantize"};
      }
    } else if (options.quantize) {
      LM_RETURN_IF_ERROR(check_quantize_flag(*options.quantize, quantization));
    }
    LM_ASSIGN_OR_RETURN(model->store_, WeightStore::from_hf_folder(path, quantization));
    naming = WeightNaming::kHuggingFace;
  } else {
    LM_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::open(path));
    model->gguf_ = std::make_shared<const GgufFile>(std::move(gguf));
    LM_ASSIGN_OR_RETURN(model->config_, config_from_gguf(*model->gguf_));
    if (options.quantize && !load_quantization_dtype(*options.quantize)) {
      return Error{"--quantize " + *options.quantize + ": " + path +
                   " is a GGUF file, served in its own block formats; --quantize " +
                   *options.quantize + " applies to Hugging Face folders"};
    }
    model->store_ = WeightStore::from_gguf(model->gguf_);
    naming = WeightNaming::kGguf;
  }
  LM_ASSIGN_OR_RETURN(model->weights_, bind_llama_weights(model->config_, model->store_, naming));
  model->pack_fp8_weights();
  if (options.rope_scaling) {
    override_rope_scaling(model->config_, *options.rope_scaling);
    model->weights_.rope_freq_factors
        .clear();  // GGUF's llama3 factors belong to the replaced scaling
  }
  return model;
}

void LlamaModel::convert_float_weights(DType dtype, ThreadPool& pool) {
  LM_CHECK_MSG(prepared_weights_.view().empty() && converted_weights_.view().empty(),
               "weights are converted once, before they are prepared for the CPU");
  lm::convert_float_weights(weights_, dtype, converted_weights_, pool,
                            [&](const Tensor& source) { drop_file_pages(source); });
}

void LlamaModel::pack_fp8_weights() {
  LM_CHECK_MSG(fp8_weights_.view().empty(), "FP8 weights are packed once");
  std::vector<Tensor*> fp8;
  for (LlamaLayerWeights& layer : weights_.layers)
    for (Tensor* w : layer.linears())
      if (w->fp8_scales != nullptr) fp8.push_back(w);
  if (weights_.lm_head.fp8_scales != nullptr) fp8.push_back(&weights_.lm_head);
  if (fp8.empty()) return;
  int64_t bytes = 0;
  for (const Tensor* w : fp8) bytes += (w->numel() + 63) / 64 * 64;
  fp8_weights_ = Buffer::of_bytes(bytes, Buffer::Pages::kHuge);
  auto* dst = static_cast<uint8_t*>(fp8_weights_.view().data);
  for (Tensor* w : fp8) {
    const Tensor source = *w;
    ops::pack_fp8_weight(*w, dst, fp8_scales_.emplace_back());
    // Rows quantized at load (--quantize fp8) lie in an arena of ours, freed whole below.
    if (!in_buffer(source, quantized_weights_)) drop_file_pages(source);
    dst += (w->numel() + 63) / 64 * 64;
  }
  // Every matrix quantized at load now has its panels: the rows are not held twice.
  release_unused_quantized_weights();
}

void LlamaModel::release_unused_quantized_weights() {
  if (quantized_weights_.view().data == nullptr) return;
  std::vector<const Tensor*> all{&weights_.embed_tokens, &weights_.lm_head};
  for (const LlamaLayerWeights& layer : weights_.layers)
    for (const Tensor* w : layer.linears()) all.push_back(w);
  if (std::ranges::none_of(all, [&](const Tensor* w) { return in_buffer(*w, quantized_weights_); }))
    quantized_weights_ = Buffer();
}

void LlamaModel::drop_file_pages(const Tensor& source) const {
  store_.drop_pages(source.data, static_cast<size_t>(source.dim(0) * source.row_bytes()));
}

int64_t LlamaModel::quantize_float_weights(DType block, ThreadPool& pool,
                                           ops::RowQuantizer quantizer) {
  LM_CHECK_MSG(prepared_weights_.view().empty() && converted_weights_.view().empty(),
               "weights are quantized once, before they are converted or prepared for the CPU");
  const int64_t n = lm::quantize_float_weights(
      weights_, block, quantizer, quantized_weights_, pool,
      [&](const Tensor& source) { drop_file_pages(source); }, &fp8_scales_);
  if (quantizer == ops::RowQuantizer::kFp8Tensor) pack_fp8_weights();
  return n;
}

int64_t LlamaModel::workspace_bytes_per_token(const ModelConfig& c) {
  const int64_t q_dim = c.num_attention_heads * c.head_dim;
  const int64_t kv_dim = c.num_key_value_heads * c.head_dim;
  // x, normed, q, k, v, attn, gate, up (resize_workspace), and with experts moe_out + SparseMoe's.
  const int64_t moe = c.moe.num_experts == 0
                          ? 0
                          : static_cast<int64_t>(sizeof(float)) * c.hidden_size +
                                SparseMoe::workspace_bytes_per_token(c.moe, c.hidden_size);
  return static_cast<int64_t>(sizeof(float)) *
             (2 * c.hidden_size + 2 * q_dim + 2 * kv_dim + 2 * c.intermediate_size) +
         moe;
}

void LlamaModel::set_int8_activations(bool on) {
  const bool prepared = !prepared_weights_.view().empty();
  LM_CHECK_MSG(on || !prepared, "int8 activations are fixed once weights are prepared");
  int8_activations_ = on;
  if (on && !prepared) prepare_cpu_weights();
}

void LlamaModel::prepare_cpu_weights() {
  // A tied LM head shares the embedding table, which the embedding lookup reads in rows: an
  // interleaved or panelled head is a copy and the table's mapped pages stay; a head copied as
  // rows serves the lookup too. Copies are made only because the files' pages are handed back
  // (GGUF and safetensors alike): a copy must not double the resident size.
  const Tensor table = weights_.embed_tokens;
  // --dtype's converted matrices already lie in a huge-page arena of our own: kept where they are.
  const auto in_converted = [&](const Tensor* w) { return in_buffer(*w, converted_weights_); };
  // Converted F16/BF16 matrices are put in panels where they lie, except a tied head, which is
  // the embedding table: that one gets a panel copy in the arena.
  const auto panel_in_place = [&](Tensor* w) {
    if (w->data != table.data && ops::panel_in_place(*w)) ++num_panelled_;
  };
  std::vector<Tensor*> linears;
  for (LlamaLayerWeights& layer : weights_.layers) {
    for (Tensor* w : layer.linears()) {
      if (in_converted(w)) {
        panel_in_place(w);
      } else {
        linears.push_back(w);
      }
    }
  }
  const bool head_tied = weights_.lm_head.data == table.data;
  const ops::CpuWeightPlan head_plan = ops::plan_cpu_weight(weights_.lm_head, true);
  if (!in_converted(&weights_.lm_head) ||
      (head_tied && (head_plan == ops::CpuWeightPlan::kPanels16 ||
                     head_plan == ops::CpuWeightPlan::kBf16Pairs))) {
    linears.push_back(&weights_.lm_head);
  } else {
    panel_in_place(&weights_.lm_head);
  }
  // Each source's pages go back as soon as its copy is made: loading never holds two copies.
  const auto placed = [&](size_t i, const Tensor& source) {
    const bool rows = linears[i]->layout == WeightLayout::kRows;
    const bool tied = source.data == table.data;
    // Matrices quantized at load lie in an arena of ours, freed whole below, not in the files.
    if ((!tied || rows) && !in_converted(&source) && !in_buffer(source, quantized_weights_))
      drop_file_pages(source);
    if (tied && rows) weights_.embed_tokens = *linears[i];
    if (const float* absmax = linears[i]->int8_row_absmax; absmax != nullptr) {
      linears[i]->int8_row_absmax =
          int8_row_absmax_.emplace_back(absmax, absmax + linears[i]->dim(0)).data();
    }
    if (linears[i]->layout == WeightLayout::kInterleaved8) ++num_interleaved_;
    if (linears[i]->layout == WeightLayout::kPanels16 ||
        linears[i]->layout == WeightLayout::kBf16Pairs)
      ++num_panelled_;
  };
  ops::prepare_cpu_weights(linears, /*copy_rows=*/true, prepared_weights_, placed);
  // Every matrix quantized at load now has its copy in the prepared arena: the quantized
  // originals are not held twice.
  release_unused_quantized_weights();
}

void LlamaModel::resize_workspace(int64_t n) {
  if (ws_.num_tokens >= n) return;
  const ModelConfig& c = config_;
  ws_.num_tokens = n;
  ws_.x = Buffer({n, c.hidden_size});
  ws_.normed = Buffer({n, c.hidden_size});
  ws_.q = Buffer({n, c.num_attention_heads * c.head_dim});
  ws_.k = Buffer({n, c.num_key_value_heads * c.head_dim});
  ws_.v = Buffer({n, c.num_key_value_heads * c.head_dim});
  ws_.attn = Buffer({n, c.num_attention_heads * c.head_dim});
  ws_.gate = Buffer({n, c.intermediate_size});
  ws_.up = Buffer({n, c.intermediate_size});
  if (c.moe.num_experts > 0) ws_.moe_out = Buffer({n, c.hidden_size});
}

void LlamaModel::forward_batch(const BatchInput& batch, PagedKvView& kv, std::vector<float>& logits,
                               ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int64_t n = batch.num_tokens(), num_seqs = batch.num_seqs();
  LM_CHECK(n > 0 && num_seqs > 0 && batch.query_begins.back() == n);
  LM_CHECK(static_cast<int64_t>(batch.positions.size()) == n &&
           static_cast<int64_t>(batch.slot_mapping.size()) == n);
  LM_CHECK(static_cast<int64_t>(batch.block_tables.size()) == num_seqs * batch.max_blocks_per_seq);
  LM_CHECK(static_cast<int64_t>(kv.k.size()) == c.num_hidden_layers);
  resize_workspace(n);
  Tensor x = rows_of(ws_.x.view(), 0, n);            // [n, hidden] residual stream
  Tensor normed = rows_of(ws_.normed.view(), 0, n);  // [n, hidden]
  Tensor q = rows_of(ws_.q.view(), 0, n);            // [n, heads * head_dim]
  Tensor k = rows_of(ws_.k.view(), 0, n);            // [n, kv_heads * head_dim]
  Tensor v = rows_of(ws_.v.view(), 0, n);            // [n, kv_heads * head_dim]
  Tensor attn = rows_of(ws_.attn.view(), 0, n);      // [n, heads * head_dim]
  Tensor gate = rows_of(ws_.gate.view(), 0, n);      // [n, intermediate]
  Tensor up = rows_of(ws_.up.view(), 0, n);          // [n, intermediate]

  std::vector<int32_t> first_positions(static_cast<size_t>(num_seqs));
  for (int64_t s = 0; s < num_seqs; ++s)
    first_positions[static_cast<size_t>(s)] = batch.positions[batch.query_begins[s]];
  const BatchRope global_rope = batch_rope(c, c.rope, batch, weights_.rope_freq_factors);
  std::optional<BatchRope> local_rope;
  if (c.local_rope) local_rope = batch_rope(c, *c.local_rope, batch, weights_.rope_freq_factors);
  const auto rope_mode =
      c.rope.layout == RopeLayout::kNeox ? ops::RopeMode::kNeox : ops::RopeMode::kInterleaved;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const float attention_scale = c.query_pre_attn_scalar
                                    ? static_cast<float>(1.0 / std::sqrt(*c.query_pre_attn_scalar))
                                    : 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  ops::embedding(weights_.embed_tokens, batch.token_ids.data(), n, x);
  // Gemma scales the embeddings by sqrt(hidden_size), rounded to the activations' dtype (fp32).
  if (c.gemma_scaling)
    ops::scale(x, static_cast<float>(std::sqrt(static_cast<double>(c.hidden_size))));
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const LlamaLayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
    Tensor& k_pool = kv.k[static_cast<size_t>(layer)];  // [blocks, block_size, kv_heads, head_dim]
    Tensor& v_pool = kv.v[static_cast<size_t>(layer)];

    // Attention block: new K/V go to their pool slots, then each sequence attends through its
    // block table to everything it has so far.
    ops::rms_norm(x, w.input_layernorm.data(), normed, eps, pool);
    ops::linear_shared_input(normed,
                             {{&w.q_proj, bias_view(w.q_bias), &q},
                              {&w.k_proj, bias_view(w.k_bias), &k},
                              {&w.v_proj, bias_view(w.v_bias), &v}},
                             pool, int8_activations_);
    if (c.qk_norm) {
      Tensor q_heads = per_head(q, c.head_dim), k_heads = per_head(k, c.head_dim);
      ops::rms_norm(q_heads, w.q_norm.data(), q_heads, eps, pool);
      ops::rms_norm(k_heads, w.k_norm.data(), k_heads, eps, pool);
    }
    const BatchRope& rope =
        local_rope && c.sliding_window_of(layer) > 0 ? *local_rope : global_rope;
    ops::rope(q, c.head_dim, rope.cos.data(), rope.sin.data(), rope_mode, c.rotary_dims(), pool);
    ops::rope(k, c.head_dim, rope.cos.data(), rope.sin.data(), rope_mode, c.rotary_dims(), pool);
    // The checkpoint's FP8 KV scales: the cache holds K / k_scale and V / v_scale, so the scores
    // take k_scale (in the softmax scale) and the outputs, weighted sums of V rows, v_scale.
    const bool kv_scaled = w.has_kv_scales && is_fp8(k_pool.dtype);
    if (kv_scaled) {
      divide_rows(k, w.k_scale);
      divide_rows(v, w.v_scale);
    }
    ops::store_kv(k, v, batch.slot_mapping.data(), k_pool, v_pool, pool);
    ops::paged_attention(q, k_pool, v_pool, attn, batch.query_begins.data(), first_positions.data(),
                         batch.block_tables.data(), batch.max_blocks_per_seq, num_seqs,
                         {kv_scaled ? attention_scale * w.k_scale : attention_scale,
                          c.sliding_window_of(layer), static_cast<float>(c.attn_logit_softcapping)},
                         pool);
    if (kv_scaled) ops::scale(attn, w.v_scale);
    ops::linear(attn, w.o_proj, {}, normed, pool, int8_activations_);
    if (c.sandwich_norms) ops::rms_norm(normed, w.attn_output_norm.data(), normed, eps, pool);
    ops::add(x, normed, pool);

    // MLP block: down(act(gate(x)) * up(x)), SwiGLU or GeGLU, or the sparse MoE block.
    ops::rms_norm(x, w.post_attention_layernorm.data(), normed, eps, pool);
    Tensor mlp_out = normed;
    if (c.is_sparse_layer(layer)) {
      mlp_out = rows_of(ws_.moe_out.view(), 0, n);
      moe_.forward(c.moe, w.moe, normed, mlp_out, pool, int8_activations_);
    } else {
      ops::linear_shared_input(normed, {{&w.gate_proj, {}, &gate}, {&w.up_proj, {}, &up}}, pool,
                               int8_activations_);
      if (c.mlp_activation == MlpActivation::kGeluTanh) {
        ops::gelu_tanh_mul(gate, up, pool);
      } else {
        ops::silu_mul(gate, up, pool);
      }
      ops::linear(gate, w.down_proj, {}, normed, pool, int8_activations_);
    }
    if (c.sandwich_norms) ops::rms_norm(mlp_out, w.mlp_output_norm.data(), mlp_out, eps, pool);
    ops::add(x, mlp_out, pool);
  }

  // LM head only for the rows that sample: gather them, final norm, one matmul.
  const auto rows = static_cast<int64_t>(batch.logit_rows.size());
  Tensor final_normed = rows_of(normed, 0, rows);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t row = batch.logit_rows[static_cast<size_t>(r)];
    LM_CHECK(row >= 0 && row < n);
    std::copy_n(x.as<float>() + row * c.hidden_size, c.hidden_size,
                final_normed.as<float>() + r * c.hidden_size);
  }
  ops::rms_norm(final_normed, weights_.norm.data(), final_normed, eps, pool);
  logits.resize(static_cast<size_t>(rows * c.vocab_size));
  Tensor out{DType::kF32, {rows, c.vocab_size}, logits.data(), Device::kCpu};
  if (rows > 0) ops::linear(final_normed, weights_.lm_head, {}, out, pool, int8_activations_);
  if (c.final_logit_softcapping > 0)
    ops::softcap(out, static_cast<float>(c.final_logit_softcapping));
}

}  // namespace lm
