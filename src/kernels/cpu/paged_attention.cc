// Paged attention: the same row-chunk attention as attention_causal (attention_work.h, so an
// identity block table gives bit-identical results), with each position's K/V row found through
// the sequence's block table.
#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/attention_work.h"

namespace lm::kernels {

void store_kv(const float* k, const float* v, const int64_t* slot_mapping, float* k_pool,
              float* v_pool, int64_t num_tokens, int64_t kv_dim) {
  const auto row_bytes = static_cast<size_t>(kv_dim) * sizeof(float);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;
    std::memcpy(k_pool + slot * kv_dim, k + t * kv_dim, row_bytes);
    std::memcpy(v_pool + slot * kv_dim, v + t * kv_dim, row_bytes);
  }
}

void paged_attention(const float* q, const float* k_pool, const float* v_pool, float* out,
                     const int32_t* query_begins, const int32_t* first_positions,
                     const int32_t* block_tables, int64_t max_blocks_per_seq, int64_t num_seqs,
                     int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, int64_t block_size,
                     float scale, ThreadPool& pool, Isa isa) {
  LM_CHECK(num_seqs >= 0 && head_dim > 0 && block_size > 0 && max_blocks_per_seq >= 0);
  LM_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0);
  const int64_t kv_row = num_kv_heads * head_dim;  // floats per slot

  // Every sequence's K/V row offsets, read once from its block table.
  std::vector<int64_t> offset_begins(static_cast<size_t>(num_seqs) + 1, 0);
  for (int64_t s = 0; s < num_seqs; ++s) {
    LM_CHECK(query_begins[s] <= query_begins[s + 1] && first_positions[s] >= 0);
    const int64_t num_positions = first_positions[s] + query_begins[s + 1] - query_begins[s];
    LM_CHECK(num_positions == 0 || (num_positions - 1) / block_size < max_blocks_per_seq);
    offset_begins[s + 1] = offset_begins[s] + num_positions;
  }
  std::vector<int64_t> offsets(static_cast<size_t>(offset_begins[num_seqs]));
  std::vector<AttentionSequence> sequences(static_cast<size_t>(num_seqs));
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int32_t* block_table = block_tables + s * max_blocks_per_seq;
    int64_t* seq_offsets = offsets.data() + offset_begins[s];
    for (int64_t p = 0; p < offset_begins[s + 1] - offset_begins[s]; ++p)
      seq_offsets[p] = (block_table[p / block_size] * block_size + p % block_size) * kv_row;
    sequences[s] = {query_begins[s], query_begins[s + 1] - query_begins[s], first_positions[s],
                    seq_offsets};
  }
  attend_sequences(isa_kernels(isa), q, out, sequences.data(), num_seqs, k_pool, v_pool, num_heads,
                   num_kv_heads, head_dim, scale, pool);
}

}  // namespace lm::kernels
