// How both attention kernels (contiguous and paged) split their work into attend_rows calls:
// every (sequence, KV head) pair's query rows (its tokens x the heads of the GQA group, which all
// read the same K/V rows) in chunks of kAttentionMaxRows.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kv_format.h"

namespace lm::kernels {

struct AttentionSequence {
  int64_t first_token = 0;     // its first query row in q / out (a token index)
  int64_t num_tokens = 0;      // query tokens
  int64_t first_position = 0;  // position of its first query token
  // Float offset of position p's K/V row from k / v (for KV head 0), for every position its last
  // query token sees.
  const int64_t* offsets = nullptr;
};

// The K and V rows attention reads: elements in `format`; the offsets of AttentionSequence count
// elements from k / v.
struct KvRows {
  const void* k = nullptr;
  const void* v = nullptr;
  KvFormat format = KvFormat::kF32;
};

// q, out: [tokens, num_heads, head_dim]; token t of sequence s attends to positions
// [0, first_position + t - first_token]. KV head g's rows start at element g * head_dim. softcap
// > 0: scores become softcap * tanh(score / softcap) (attend_rows_softcapped, never split).
// Rows in another format than fp32 are read in place by the decode kernels (1-8 rows, which
// convert each element as they load it: IsaKernels::attend_rows_kv, and the split pair for 1-4)
// -- a decode's group, and in chunks of up to 8 the rows of a sequence with few (a speculative
// step's verified tokens) -- and otherwise (prefill chunks, the scalar table, soft-capping)
// decoded, a work item's positions at a time, into fp32 scratch that the fp32 kernels read. Either
// way a row's result is the fp32 kernel's on the decoded values, whatever shares its batch.
void attend_sequences(const IsaKernels& kernels, const float* q, float* out,
                      const AttentionSequence* sequences, int64_t num_sequences, const KvRows& kv,
                      int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                      float softcap, ThreadPool& pool);

}  // namespace lm::kernels
