// Attention work items: chunks of up to kAttentionMaxRows (token, head) rows of one sequence and
// KV head, listed so that the contiguous ranges the pool hands each thread cost about the same.
#include "kernels/cpu/attention_work.h"

#include <algorithm>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/attention_rows.h"

namespace lm::kernels {
namespace {

struct Chunk {
  int64_t sequence;
  int64_t kv_head;
  int64_t first_row;  // rows of a (sequence, KV head): token-major, then the group's heads
  int64_t num_rows;
};

// Causal chunks late in a sequence see more positions. Alternating the cheapest and the dearest
// remaining chunk makes every contiguous range of the list cost about its share.
std::vector<Chunk> interleave_cheap_and_dear(std::vector<Chunk> chunks) {
  std::vector<Chunk> out;
  out.reserve(chunks.size());
  size_t lo = 0, hi = chunks.size();
  while (lo < hi) {
    out.push_back(chunks[lo++]);
    if (lo < hi) out.push_back(chunks[--hi]);
  }
  return out;
}

}  // namespace

void attend_sequences(const IsaKernels& kernels, const float* q, float* out,
                      const AttentionSequence* sequences, int64_t num_sequences, const float* k,
                      const float* v, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                      float scale, ThreadPool& pool) {
  LM_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0 && head_dim > 0);
  const int64_t group_size = num_heads / num_kv_heads;
  std::vector<Chunk> chunks;
  for (int64_t s = 0; s < num_sequences; ++s) {
    const int64_t rows = sequences[s].num_tokens * group_size;
    for (int64_t g = 0; g < num_kv_heads; ++g) {
      for (int64_t r0 = 0; r0 < rows; r0 += kAttentionMaxRows)
        chunks.push_back({s, g, r0, std::min(kAttentionMaxRows, rows - r0)});
    }
  }
  chunks = interleave_cheap_and_dear(std::move(chunks));

  pool.parallel_for(static_cast<int64_t>(chunks.size()), [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>(attention_rows::scratch_floats(head_dim)));
    const float* q_rows[kAttentionMaxRows];
    float* out_rows[kAttentionMaxRows];
    int64_t num_positions[kAttentionMaxRows];
    for (int64_t c = begin; c < end; ++c) {
      const Chunk& chunk = chunks[static_cast<size_t>(c)];
      const AttentionSequence& seq = sequences[chunk.sequence];
      for (int64_t i = 0; i < chunk.num_rows; ++i) {
        const int64_t row = chunk.first_row + i;
        const int64_t token = row / group_size;
        const int64_t head = chunk.kv_head * group_size + row % group_size;
        const int64_t offset = ((seq.first_token + token) * num_heads + head) * head_dim;
        q_rows[i] = q + offset;
        out_rows[i] = out + offset;
        num_positions[i] = seq.first_position + token + 1;
      }
      kernels.attend_rows(q_rows, out_rows, num_positions, chunk.num_rows,
                          k + chunk.kv_head * head_dim, v + chunk.kv_head * head_dim, seq.offsets,
                          head_dim, scale, scratch.data());
    }
  });
}

}  // namespace lm::kernels
