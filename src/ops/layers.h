// Row-wise operators of the Llama block over fp32 activations: RMSNorm, SwiGLU, residual add,
// rotary embeddings and causal attention over a contiguous KV cache.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/tensor.h"

namespace lm::ops {

enum class RopeMode { kNeox, kInterleaved };

// y[r, :] = rms_norm(x[r, :]) * weight; x, y: [rows, n]; weight: [n] fp32. y may alias x.
void rms_norm(const Tensor& x, const float* weight, Tensor& y, float eps);

// gate = silu(gate) * up, both [rows, n].
void silu_mul(Tensor& gate, const Tensor& up);

// y += x (same shape).
void add(Tensor& y, const Tensor& x);

// x: [num_tokens, num_heads * head_dim]; rotates each head in place.
void rope(Tensor& x, int64_t head_dim, const int32_t* positions, const float* inv_freq,
          RopeMode mode, float attention_scaling);

// q, out: [num_tokens, num_heads * head_dim]; k_cache, v_cache: [capacity, num_kv_heads * head_dim]
// holding positions [0, first_position + num_tokens). Token i attends causally up to
// first_position + i.
void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, Tensor& out,
               int64_t head_dim, int64_t first_position, ThreadPool& pool);

}  // namespace lm::ops
