#include "runtime/cuda/cuda_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/check.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/dequant_gemv.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/paged_decode_attention.h"
#include "kernels/cuda/paged_prefill_attention.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/rows.h"
#include "kernels/cuda/store_kv.h"
#include "kernels/cuda/weight_dequantize.h"

namespace lm::cuda_runtime {
namespace {

namespace kc = kernels::cuda;
using kernels::RowFormat;

// cuBLAS's recommended workspace on Hopper (and enough for every earlier architecture).
constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;

}  // namespace

CudaModel::CudaModel(const ModelConfig& config, DeviceWeightPlan plan, DeviceAllocation weights,
                     const CudaModelLimits& limits, cudaStream_t stream)
    : config_(config),
      plan_(std::move(plan)),
      weights_(std::move(weights)),
      limits_(limits),
      stream_(stream) {
  const ModelConfig& c = config_;
  LM_CHECK(limits.max_tokens > 0 && limits.max_context_len > 0);
  for (const DeviceMatrix& m : plan_.matrices) {
    LM_CHECK_MSG(kc::gemv_supports(m.device) && kc::dequantize_supports(m.device),
                 "a device weight format without its kernels");
  }
  const int64_t t = limits.max_tokens;
  const int64_t q_width = c.num_attention_heads * c.head_dim;
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;
  const int64_t widest = std::max({c.hidden_size, c.intermediate_size, q_width});
  const int64_t decode_seqs = std::min(limits.max_decode_seqs, kMaxDecodeAttentionSeqs);
  const int64_t partial_floats = kc::decode_attention_workspace_floats(
      std::max<int64_t>(decode_seqs, 1), c.num_attention_heads, c.head_dim, limits.max_context_len);
  carve(workspace_,
        {part(x_, t * c.hidden_size * 4), part(normed_, t * c.hidden_size * 4),
         part(q_, t * q_width * 4), part(k_, t * kv_width * 4), part(v_, t * kv_width * 4),
         part(attn_, t * q_width * 4), part(gate_, t * c.intermediate_size * 4),
         part(up_, t * c.intermediate_size * 4), part(decode_partials_, partial_floats * 4),
         part(act16_, t * widest * 2), part(dequantized_, plan_.max_dequantized_elements * 2),
         part(cublas_workspace_, kCublasWorkspaceBytes)});
  gemm_.set_workspace(cublas_workspace_, static_cast<size_t>(kCublasWorkspaceBytes));
}

int64_t CudaModel::kv_bytes_per_block(const ModelConfig& c, int64_t block_size) {
  return 2 * c.num_hidden_layers * block_size * c.num_key_value_heads * c.head_dim *
         static_cast<int64_t>(sizeof(float));
}

void CudaModel::allocate_kv(int64_t num_blocks, int64_t block_size) {
  const ModelConfig& c = config_;
  LM_CHECK(num_blocks >= 2 && block_size > 0);
  kv_ = DeviceAllocation();  // the warm-up's pool goes before the real one is taken
  kv_ = DeviceAllocation(num_blocks * kv_bytes_per_block(c, block_size));
  kv_num_blocks_ = num_blocks;
  kv_block_size_ = block_size;
  const int64_t layer_bytes = num_blocks * block_size * c.num_key_value_heads * c.head_dim * 4;
  k_pools_.clear();
  v_pools_.clear();
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    k_pools_.push_back(kv_.as<float>((2 * l) * layer_bytes));
    v_pools_.push_back(kv_.as<float>((2 * l + 1) * layer_bytes));
  }
}

void CudaModel::release_kv() {
  kv_ = DeviceAllocation();
  kv_num_blocks_ = 0;
  k_pools_.clear();
  v_pools_.clear();
}

const float* CudaModel::vector(int32_t index) const {
  return index < 0 ? nullptr : weights_.as<float>(plan_.vectors[static_cast<size_t>(index)].offset);
}

void CudaModel::linear(int32_t matrix, const float* x, float* y, int64_t rows, int32_t bias) {
  const DeviceMatrix& m = plan_.matrices[static_cast<size_t>(matrix)];
  const float* b = vector(bias);
  if (rows <= kGemvMaxRows) {
    for (int64_t r = 0; r < rows; ++r)
      kc::dequant_gemv(m.device, matrix_data(m), m.row_bytes, x + r * m.cols, y + r * m.rows,
                       m.rows, m.cols, b, stream_);
    return;
  }
  const bool bf16 = m.device == RowFormat::kBF16;
  const void* w = matrix_data(m);
  if (m.device != RowFormat::kF16 && !bf16) {
    kc::dequantize_rows_f16(m.device, w, m.row_bytes, dequantized_, m.rows, m.cols, stream_);
    w = dequantized_;
  }
  kc::round_activations(x, act16_, rows * m.cols, bf16, stream_);
  gemm_.matmul_f32_out(bf16 ? kc::GemmType::kBF16 : kc::GemmType::kF16, act16_, w, y, rows, m.rows,
                       m.cols, stream_);
  if (b != nullptr) kc::add_bias_rows(y, b, rows, m.rows, stream_);
}

void CudaModel::forward(const DeviceStep& step, float* logits) {
  const ModelConfig& c = config_;
  const int64_t n = step.num_tokens;
  LM_CHECK(n > 0 && n <= limits_.max_tokens && kv_num_blocks_ > 0);
  LM_CHECK(step.num_logit_rows >= 0 && step.num_logit_rows <= limits_.max_tokens);
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const float scale = c.query_pre_attn_scalar
                          ? static_cast<float>(1.0 / std::sqrt(*c.query_pre_attn_scalar))
                          : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const auto rope_mode = c.rope.layout == RopeLayout::kNeox ? kernels::RopeMode::kNeox
                                                            : kernels::RopeMode::kInterleaved;
  const float* inv_freq = vector(plan_.rope_inv_freq);
  const int64_t kv_width = c.num_key_value_heads * c.head_dim;

  const DeviceMatrix& embed = plan_.matrices[static_cast<size_t>(plan_.embed_tokens)];
  kc::embedding_gather(embed.device, matrix_data(embed), embed.row_bytes, step.token_ids, x_, n,
                       c.hidden_size, stream_);
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const DeviceLayerSlots& w = plan_.layers[static_cast<size_t>(layer)];
    float* k_pool = k_pools_[static_cast<size_t>(layer)];
    float* v_pool = v_pools_[static_cast<size_t>(layer)];

    // Attention block: new K/V to their slots, then each sequence attends through its block
    // table to everything it has so far.
    kc::rms_norm(x_, vector(w.input_layernorm), normed_, n, c.hidden_size, eps, stream_);
    linear(w.q_proj, normed_, q_, n, w.q_bias);
    linear(w.k_proj, normed_, k_, n, w.k_bias);
    linear(w.v_proj, normed_, v_, n, w.v_bias);
    kc::apply_rope(q_, step.positions, inv_freq, n, c.num_attention_heads, c.head_dim, rope_mode,
                   plan_.rope_attention_scaling, stream_);
    kc::apply_rope(k_, step.positions, inv_freq, n, c.num_key_value_heads, c.head_dim, rope_mode,
                   plan_.rope_attention_scaling, stream_);
    kc::store_kv(k_, v_, step.slot_mapping, k_pool, v_pool, n, kv_width, stream_);
    if (step.pure_decode &&
        step.num_seqs <= std::min(kMaxDecodeAttentionSeqs, limits_.max_decode_seqs)) {
      // The partitions' workspace was sized for max_decode_seqs sequences of max_context_len.
      LM_CHECK(step.max_context_len <= limits_.max_context_len);
      kc::paged_decode_attention(q_, k_pool, v_pool, attn_, step.context_lens, step.block_tables,
                                 step.max_blocks_per_seq, step.num_seqs, c.num_attention_heads,
                                 c.num_key_value_heads, c.head_dim, kv_block_size_, scale,
                                 step.max_context_len, decode_partials_, stream_);
    } else {
      LM_CHECK(step.query_begins != nullptr && step.first_positions != nullptr);
      kc::paged_prefill_attention(q_, k_pool, v_pool, attn_, step.query_begins,
                                  step.first_positions, step.block_tables, step.max_blocks_per_seq,
                                  step.num_seqs, c.num_attention_heads, c.num_key_value_heads,
                                  c.head_dim, kv_block_size_, scale, step.max_query_len, stream_);
    }
    linear(w.o_proj, attn_, normed_, n, -1);
    kc::add_inplace(x_, normed_, n * c.hidden_size, stream_);

    // MLP block: down(silu(gate(x)) * up(x)).
    kc::rms_norm(x_, vector(w.post_attention_layernorm), normed_, n, c.hidden_size, eps, stream_);
    linear(w.gate_proj, normed_, gate_, n, -1);
    linear(w.up_proj, normed_, up_, n, -1);
    kc::silu_mul(gate_, up_, gate_, n * c.intermediate_size, stream_);
    linear(w.down_proj, gate_, normed_, n, -1);
    kc::add_inplace(x_, normed_, n * c.hidden_size, stream_);
  }

  // LM head only for the rows that sample: gather them, final norm, one matmul.
  const int64_t rows = step.num_logit_rows;
  if (rows == 0) return;
  if (step.logit_rows != nullptr) {
    kc::gather_rows(x_, step.logit_rows, normed_, rows, c.hidden_size, stream_);
    kc::rms_norm(normed_, vector(plan_.norm), normed_, rows, c.hidden_size, eps, stream_);
  } else {
    LM_CHECK(rows == n);
    kc::rms_norm(x_, vector(plan_.norm), normed_, rows, c.hidden_size, eps, stream_);
  }
  linear(plan_.lm_head, normed_, logits, rows, -1);
}

}  // namespace lm::cuda_runtime
