// Decode attention over the paged KV cache: one query row per sequence (its newest position),
// with long contexts split into partitions that run in parallel and a second kernel that merges
// their softmax statistics. The CPU twin is kernels::paged_attention with one query per sequence.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lm::kernels::cuda {

// Positions per partition: one block scores at most this many positions (scores stay in shared
// memory), so a 32k context spreads over 64 blocks per head instead of one.
inline constexpr int64_t kDecodePartitionSize = 512;

int64_t decode_attention_num_partitions(int64_t max_context_len);

// Floats of `workspace` paged_decode_attention needs (0 when one partition suffices).
int64_t decode_attention_workspace_floats(int64_t num_seqs, int64_t num_heads, int64_t head_dim,
                                          int64_t max_context_len);

// q, out: [num_seqs, num_heads, head_dim] fp32 (out may alias q). Sequence s attends to positions
// [0, context_lens[s]) (its newest K/V row already stored), context_lens[s] in
// [1, max_context_len]. k_pool, v_pool: [num_blocks, block_size, num_kv_heads, head_dim]; position
// p of sequence s is row p % block_size of block block_tables[s * max_blocks_per_seq + p /
// block_size]. Grouped-query: head h reads kv head h / (num_heads / num_kv_heads). Scores are
// q.k * scale; fp32 throughout. workspace: device memory of the size above (may be null if 0).
void paged_decode_attention(const float* q, const float* k_pool, const float* v_pool, float* out,
                            const int32_t* context_lens, const int32_t* block_tables,
                            int64_t max_blocks_per_seq, int64_t num_seqs, int64_t num_heads,
                            int64_t num_kv_heads, int64_t head_dim, int64_t block_size, float scale,
                            int64_t max_context_len, float* workspace, cudaStream_t stream);

}  // namespace lm::kernels::cuda
