// How both attention kernels (contiguous and paged) split their work into attend_rows calls:
// every (sequence, KV head) pair's query rows (its tokens x the heads of the GQA group, which all
// read the same K/V rows) in chunks of kAttentionMaxRows.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/cpu/isa.h"

namespace lm::kernels {

struct AttentionSequence {
  int64_t first_token = 0;     // its first query row in q / out (a token index)
  int64_t num_tokens = 0;      // query tokens
  int64_t first_position = 0;  // position of its first query token
  // Float offset of position p's K/V row from k / v (for KV head 0), for every position its last
  // query token sees.
  const int64_t* offsets = nullptr;
};

// q, out: [tokens, num_heads, head_dim]; token t of sequence s attends to positions
// [0, first_position + t - first_token]. KV head g's rows start at k + g * head_dim. softcap > 0:
// scores become softcap * tanh(score / softcap) (attend_rows_softcapped, never split).
void attend_sequences(const IsaKernels& kernels, const float* q, float* out,
                      const AttentionSequence* sequences, int64_t num_sequences, const float* k,
                      const float* v, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                      float scale, float softcap, ThreadPool& pool);

}  // namespace lm::kernels
