// Paged attention: the same tiled online softmax as attention_causal (attend_row, so an identity
// block table gives bit-identical results), with each position's K/V row found through the
// sequence's block table.
#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/online_softmax.h"

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
  const IsaKernels& kernels = isa_kernels(isa);
  const int64_t group_size = num_heads / num_kv_heads;
  const int64_t kv_row = num_kv_heads * head_dim;  // floats per slot
  const int64_t num_tokens = num_seqs > 0 ? query_begins[num_seqs] : 0;

  // The sequence of every query row, so work items can be split evenly over (token, head).
  std::vector<int32_t> seq_of_token(static_cast<size_t>(num_tokens));
  for (int64_t s = 0; s < num_seqs; ++s) {
    LM_CHECK(query_begins[s] <= query_begins[s + 1] && first_positions[s] >= 0);
    const int64_t last_position = first_positions[s] + query_begins[s + 1] - query_begins[s] - 1;
    LM_CHECK(last_position / block_size < max_blocks_per_seq);
    for (int64_t t = query_begins[s]; t < query_begins[s + 1]; ++t)
      seq_of_token[static_cast<size_t>(t)] = static_cast<int32_t>(s);
  }

  pool.parallel_for(num_tokens * num_heads, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(kAttentionPositionTile);
    std::vector<float> acc(static_cast<size_t>(head_dim));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t token = item / num_heads;
      const int64_t head = item % num_heads;
      const int64_t seq = seq_of_token[static_cast<size_t>(token)];
      const int32_t* block_table = block_tables + seq * max_blocks_per_seq;
      const int64_t kv_offset = (head / group_size) * head_dim;
      const int64_t num_positions = first_positions[seq] + token - query_begins[seq] + 1;
      const auto row_of = [block_table, block_size, kv_row](int64_t p) {
        return (block_table[p / block_size] * block_size + p % block_size) * kv_row;
      };
      attend_row(kernels, q + item * head_dim, k_pool + kv_offset, v_pool + kv_offset, row_of,
                 num_positions, head_dim, scale, scores.data(), acc.data(), out + item * head_dim);
    }
  });
}

}  // namespace lm::kernels
