// What one batched forward reads and writes: the step's flat varlen token list (every sequence's
// new tokens back to back, with positions, K/V slots and block tables) and the paged K/V pool.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tensor/tensor.h"

namespace lm {

// The paged K/V memory, owned by the runtime: per layer a [num_blocks, block_size,
// num_key_value_heads, head_dim] fp32 tensor for keys and one for values. Position p of a
// sequence lives in slot block_table[p / block_size] * block_size + p % block_size.
struct PagedKvView {
  std::vector<Tensor> k;
  std::vector<Tensor> v;
};

struct BatchInput {
  std::span<const int32_t> token_ids;     // [num_tokens], the sequences' tokens back to back
  std::span<const int32_t> positions;     // [num_tokens], consecutive within a sequence
  std::span<const int64_t> slot_mapping;  // [num_tokens], the pool slot each token's K/V goes to
  // [num_seqs + 1]: sequence s owns rows [query_begins[s], query_begins[s + 1]).
  std::span<const int32_t> query_begins;
  std::span<const int32_t> block_tables;  // [num_seqs, max_blocks_per_seq], padded with block 0
  int64_t max_blocks_per_seq = 0;
  std::span<const int32_t> logit_rows;  // rows whose logits are computed, in output order
  // [num_seqs] or empty: the length each sequence's forward counts as for RoPE that depends on it
  // (dynamic NTK, LongRoPE). transformers runs a prompt in one forward, so every chunk of a
  // prompt counts as the whole prompt: max(prompt length, last position + 1). Empty: the last
  // position + 1.
  std::span<const int32_t> rope_lengths;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_seqs() const { return static_cast<int64_t>(query_begins.size()) - 1; }
};

}  // namespace lm
