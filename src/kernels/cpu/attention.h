// Causal self-attention over one sequence's contiguous KV cache, flash-attention style
// (online softmax over tiles of positions, no [tokens x positions] score matrix).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/cpu/isa.h"

namespace lm::kernels {

// q, out: [num_tokens, num_heads, head_dim]. k_cache, v_cache: position p, kv head h at
// p * kv_row_stride + h * head_dim. Query token i sits at position first_position + i and attends
// to positions [0, first_position + i], which must already be in the cache. Grouped-query: head h
// reads kv head h / (num_heads / num_kv_heads). Scores are q.k * scale, all math in fp32.
// out may alias q.
void attention_causal(const float* q, const float* k_cache, const float* v_cache, float* out,
                      int64_t num_tokens, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                      int64_t kv_row_stride, int64_t first_position, float scale, ThreadPool& pool,
                      Isa isa = best_isa());

}  // namespace lm::kernels
