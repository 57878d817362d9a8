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

void store_kv(const float* k, const float* v, const int64_t* slot_mapping, void* k_pool,
              void* v_pool, int64_t num_tokens, int64_t kv_dim, KvFormat format, Isa isa) {
  const int64_t row_bytes = kv_dim * kv_element_bytes(format);
  auto* k_slots = static_cast<unsigned char*>(k_pool);
  auto* v_slots = static_cast<unsigned char*>(v_pool);
  const IsaKernels& kernels = isa_kernels(isa);
  const auto encode = [&](const float* src, unsigned char* dst) {
    if (kernels.encode_kv != nullptr) {
      kernels.encode_kv(format, src, dst, kv_dim);
    } else {
      encode_kv_row(src, dst, kv_dim, format);
    }
  };
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;
    encode(k + t * kv_dim, k_slots + slot * row_bytes);
    encode(v + t * kv_dim, v_slots + slot * row_bytes);
  }
}

void paged_attention(const float* q, const void* k_pool, const void* v_pool, KvFormat format,
                     float* out, const int32_t* query_begins, const int32_t* first_positions,
                     const int32_t* block_tables, int64_t max_blocks_per_seq, int64_t num_seqs,
                     int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, int64_t block_size,
                     const AttentionOptions& options, ThreadPool& pool, Isa isa) {
  const int64_t sliding_window = options.sliding_window;
  LM_CHECK(num_seqs >= 0 && head_dim > 0 && block_size > 0 && max_blocks_per_seq >= 0);
  LM_CHECK(options.softcap >= 0.0f);
  LM_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0 && sliding_window >= 0);
  const int64_t kv_row = num_kv_heads * head_dim;  // floats per slot

  // The lowest position any row of sequence s reads: with a window, the first row's window
  // start. Table entries before it are never read: the engine leaves placeholders there for
  // blocks it has released (EngineConfig::kv_window_tokens).
  auto lowest_read = [&](int64_t s) -> int64_t {
    return sliding_window > 0 ? std::max<int64_t>(0, first_positions[s] - sliding_window + 1) : 0;
  };
  // Every sequence's K/V row offsets for positions [lowest_read(s), its last), read once from
  // its block table.
  std::vector<int64_t> offset_begins(static_cast<size_t>(num_seqs) + 1, 0);
  for (int64_t s = 0; s < num_seqs; ++s) {
    LM_CHECK(query_begins[s] <= query_begins[s + 1] && first_positions[s] >= 0);
    const int64_t num_positions = first_positions[s] + query_begins[s + 1] - query_begins[s];
    LM_CHECK(num_positions == 0 || (num_positions - 1) / block_size < max_blocks_per_seq);
    offset_begins[s + 1] = offset_begins[s] + std::max<int64_t>(0, num_positions - lowest_read(s));
  }
  std::vector<int64_t> offsets(static_cast<size_t>(offset_begins[num_seqs]));
  std::vector<AttentionSequence> sequences;
  sequences.reserve(static_cast<size_t>(num_seqs));
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int32_t* block_table = block_tables + s * max_blocks_per_seq;
    const int64_t lowest_position = lowest_read(s);
    // seq_offsets[i] is position lowest_position + i's.
    int64_t* seq_offsets = offsets.data() + offset_begins[s];
    for (int64_t i = 0; i < offset_begins[s + 1] - offset_begins[s]; ++i) {
      const int64_t p = lowest_position + i;
      seq_offsets[i] = (block_table[p / block_size] * block_size + p % block_size) * kv_row;
    }
    const int64_t first_token = query_begins[s], num_tokens = query_begins[s + 1] - first_token;
    const int64_t first_position = first_positions[s];
    // Tokens whose window reaches position 0 attend as a causal run. Each later token sees
    // positions [p - w + 1, p]: attention does not depend on where its keys sit (RoPE is in
    // them already), so it attends as a one-token sequence whose offsets start at p - w + 1.
    int64_t full = num_tokens;
    if (sliding_window > 0)
      full = std::clamp<int64_t>(sliding_window - first_position, 0, num_tokens);
    // (A causal run starts at position 0, so lowest_position is 0 whenever full > 0.)
    if (full > 0) sequences.push_back({first_token, full, first_position, seq_offsets});
    for (int64_t t = full; t < num_tokens; ++t) {
      const int64_t lowest = first_position + t - sliding_window + 1;
      sequences.push_back(
          {first_token + t, 1, sliding_window - 1, seq_offsets + (lowest - lowest_position)});
    }
  }
  attend_sequences(isa_kernels(isa), q, out, sequences.data(),
                   static_cast<int64_t>(sequences.size()), {k_pool, v_pool, format}, num_heads,
                   num_kv_heads, head_dim, options.scale, options.softcap, pool);
}

}  // namespace lm::kernels
