// Row-wise operators of the Llama block over fp32 activations: RMSNorm, SwiGLU, residual add,
// rotary embeddings, causal attention over a contiguous KV cache, and the paged pool's K/V writes
// and varlen attention.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/tensor.h"

namespace lm::ops {

enum class RopeMode { kNeox, kInterleaved };

// y[r, :] = rms_norm(x[r, :]) * weight; x, y: [rows, n]; weight: [n] fp32. y may alias x.
void rms_norm(const Tensor& x, const float* weight, Tensor& y, float eps, ThreadPool& pool);

// gate = silu(gate) * up, both [rows, n].
void silu_mul(Tensor& gate, const Tensor& up, ThreadPool& pool);

// gate = gelu_tanh(gate) * up, both [rows, n] (GeGLU).
void gelu_tanh_mul(Tensor& gate, const Tensor& up, ThreadPool& pool);

// y += x (same shape). This and the other row-wise ops split a prefill's rows over the pool (a
// decode step's few rows stay on the calling thread); each row computes the same either way.
void add(Tensor& y, const Tensor& x, ThreadPool& pool);

// x *= a.
void scale(Tensor& x, float a);

// x = cap * tanh(x / cap), as torch computes it in fp32 (Gemma 2's logit soft-capping).
void softcap(Tensor& x, float cap);

// Each token's rotary cos and sin, computed once for every rope call of a forward: cos[t * half +
// i] = cos(float(positions[t]) * inv_freq[i]) * attention_scaling, sin likewise, for t <
// num_tokens and the half = rotary_dim / 2 pairs of a head.
void rope_cos_sin(const int32_t* positions, int64_t num_tokens, const float* inv_freq, int64_t half,
                  float attention_scaling, float* cos, float* sin);

// x: [num_tokens, num_heads * head_dim]; rotates each head in place by its token's rows of
// rope_cos_sin's tables. Only the first rotary_dim elements of each head rotate (0: all).
void rope(Tensor& x, int64_t head_dim, const float* cos, const float* sin, RopeMode mode,
          int64_t rotary_dim, ThreadPool& pool);

// q, out: [num_tokens, num_heads * head_dim]; k_cache, v_cache: [capacity, num_kv_heads * head_dim]
// holding positions [0, first_position + num_tokens). Token i attends causally up to
// first_position + i.
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, Tensor& out,
               int64_t head_dim, int64_t first_position, ThreadPool& pool);

// k, v: [num_tokens, num_kv_heads * head_dim]; k_pool, v_pool: [num_blocks, block_size,
// num_kv_heads, head_dim] in F32, F16, BF16, F8_E4M3 or F8_E5M2 (the KV cache dtypes:
// kernels/cpu/kv_format.h). Token t's rows go to slot slot_mapping[t] (skipped when negative);
// the tokens' slots must differ (the engine gives each token its own), as the pool writes them in
// any order.
void store_kv(const Tensor& k, const Tensor& v, const int64_t* slot_mapping, Tensor& k_pool,
              Tensor& v_pool, ThreadPool& pool);

// q, out: [num_tokens, num_heads * head_dim], sequence s owning rows [query_begins[s],
// query_begins[s + 1]) at positions first_positions[s] + i; k_pool, v_pool as in store_kv,
// read through block_tables [num_seqs, max_blocks_per_seq]. Causal within each sequence, and as
// `options` says (scale, sliding window, soft-capping: kernels/cpu/paged_attention.h).
struct AttentionOptions {
  float scale = 1.0f;          // scores are q.k * scale
  int64_t sliding_window = 0;  // > 0: position p sees [p - sliding_window + 1, p] only
  float softcap = 0.0f;        // > 0: scores become softcap * tanh(score / softcap) (Gemma 2)
};
void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, Tensor& out,
                     const int32_t* query_begins, const int32_t* first_positions,
                     const int32_t* block_tables, int64_t max_blocks_per_seq, int64_t num_seqs,
                     const AttentionOptions& options, ThreadPool& pool);

}  // namespace lm::ops
