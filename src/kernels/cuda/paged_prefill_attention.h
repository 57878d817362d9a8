// Varlen causal attention for a flat batch (prompt chunks and decode rows alike) reading K/V from
// the paged cache, flash-attention-2 style: query tiles in parallel, key tiles streamed through
// shared memory with an online softmax, never a [tokens x positions] matrix. The same contract as
// the CPU twin kernels::paged_attention (kernels/cpu/paged_attention.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lm::kernels::cuda {

// Largest head_dim supported (256: Gemma; Llama and Qwen use 64 or 128).
inline constexpr int64_t kPrefillMaxHeadDim = 256;

// q, out: [num_tokens, num_heads, head_dim] fp32 (out may alias q): sequence s owns rows
// [query_begins[s], query_begins[s + 1]) and its row i sits at position first_positions[s] + i,
// attending to positions [0, that position], whose K/V rows must already be stored. k_pool,
// v_pool: [num_blocks, block_size, num_kv_heads, head_dim] through block_tables as in
// paged_decode_attention. max_query_len: the longest query_begins[s + 1] - query_begins[s] (sizes
// the grid). All device pointers except the sizes.
void paged_prefill_attention(const float* q, const float* k_pool, const float* v_pool, float* out,
                             const int32_t* query_begins, const int32_t* first_positions,
                             const int32_t* block_tables, int64_t max_blocks_per_seq,
                             int64_t num_seqs, int64_t num_heads, int64_t num_kv_heads,
                             int64_t head_dim, int64_t block_size, float scale,
                             int64_t max_query_len, cudaStream_t stream);

}  // namespace lm::kernels::cuda
