// The paged KV cache's kernels: writing a flat batch's K/V rows into their pool slots, and causal
// attention for a flat varlen batch whose positions are read through per-sequence block tables.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kv_format.h"

namespace lm::kernels {

// How a layer's scores become weights, besides the causal mask.
struct AttentionOptions {
  float scale = 1.0f;          // scores are q.k * scale
  int64_t sliding_window = 0;  // > 0: position p sees [p - sliding_window + 1, p] only
  float softcap = 0.0f;        // > 0: scores become softcap * tanh(score / softcap) (Gemma 2)
};

// k, v: [num_tokens, kv_dim]. k_pool, v_pool: [num_slots, kv_dim] elements in `format`. Token
// t's rows are written to slot slot_mapping[t] (encode_kv_row's bytes, by isa's encode_kv where
// it has one); a negative slot skips the token.
void store_kv(const float* k, const float* v, const int64_t* slot_mapping, void* k_pool,
              void* v_pool, int64_t num_tokens, int64_t kv_dim, KvFormat format,
              Isa isa = best_isa());
inline void store_kv(const float* k, const float* v, const int64_t* slot_mapping, float* k_pool,
                     float* v_pool, int64_t num_tokens, int64_t kv_dim) {
  store_kv(k, v, slot_mapping, k_pool, v_pool, num_tokens, kv_dim, KvFormat::kF32);
}

// q, out: [num_tokens, num_heads, head_dim], the sequences' query rows back to back: sequence s
// owns rows [query_begins[s], query_begins[s + 1]) (query_begins has num_seqs + 1 entries), its
// row i sits at position first_positions[s] + i and attends to positions [0, that position].
// k_pool, v_pool: [num_blocks, block_size, num_kv_heads, head_dim]; position p of sequence s
// lives in block block_tables[s * max_blocks_per_seq + p / block_size], row p % block_size.
// Grouped-query: head h reads kv head h / (num_heads / num_kv_heads). Flash-style online softmax
// in tiles of positions (no score matrix), fp32, parallel over chunks of (token, head) rows that
// share a KV head (attention_work.h). out may alias q.
// options.sliding_window narrows what a row at position p sees to [p - w + 1, p], as
// transformers' sliding-window mask does (Mistral, Qwen2, Phi-3, Gemma's local layers); block
// table entries wholly before the first row's window are then never read (the engine may leave
// placeholders there for blocks it released).
// The pool's elements in `format` (kv_format.h): read as their fp32 values, the results are
// those of an fp32 pool holding the same values.
void paged_attention(const float* q, const void* k_pool, const void* v_pool, KvFormat format,
                     float* out, const int32_t* query_begins, const int32_t* first_positions,
                     const int32_t* block_tables, int64_t max_blocks_per_seq, int64_t num_seqs,
                     int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, int64_t block_size,
                     const AttentionOptions& options, ThreadPool& pool, Isa isa = best_isa());
inline void paged_attention(const float* q, const float* k_pool, const float* v_pool, float* out,
                            const int32_t* query_begins, const int32_t* first_positions,
                            const int32_t* block_tables, int64_t max_blocks_per_seq,
                            int64_t num_seqs, int64_t num_heads, int64_t num_kv_heads,
                            int64_t head_dim, int64_t block_size, const AttentionOptions& options,
                            ThreadPool& pool, Isa isa = best_isa()) {
  paged_attention(q, k_pool, v_pool, KvFormat::kF32, out, query_begins, first_positions,
                  block_tables, max_blocks_per_seq, num_seqs, num_heads, num_kv_heads, head_dim,
                  block_size, options, pool, isa);
}

}  // namespace lm::kernels
