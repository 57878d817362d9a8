// Attention work items: chunks of up to kAttentionMaxRows (token, head) rows of one sequence and
// KV head, listed so that the contiguous ranges the pool hands each thread cost about the same.
#include "kernels/cpu/attention_work.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
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

// Decode chunks of sequences at least this long are split over the threads when there are too
// few chunks to keep every thread busy (split_chunks).
constexpr int64_t kSplitMinPositions = 256;

// A (sequence, KV head) with at most this many query rows over a 16/8-bit cache (a speculative
// step's verified tokens, a short prompt tail: SmolLM2's 5 tokens x 3 heads) is cut into chunks
// of at most the in-place kernel's 8 rows, each reading the cache's rows as they are, instead
// of one chunk that first decodes every position into fp32 scratch: a verify step's scratch
// round trip of its whole context cost more than its chunks' re-reads of the rows (from L2).
// Longer prefill chunks share one decode among their chunks and keep it.
constexpr int64_t kInPlaceMaxRows = 16;

// Rows per in-place chunk of a (sequence, KV head) with `rows` rows: as few chunks of equal size
// as the kernel allows (each chunk converts and transposes every K row once for all its rows),
// but two from 5 rows on when the step has fewer (sequence, KV head) pairs than two per thread:
// SmolLM2's one verifying sequence has 3 KV heads for 2 threads (15 rows: 8 + 7 each, 6 chunks).
int64_t in_place_chunk_rows(int64_t rows, bool few_pairs) {
  const int64_t chunks =
      std::max<int64_t>((rows + kAttentionInPlaceMaxRows - 1) / kAttentionInPlaceMaxRows,
                        few_pairs && rows > kAttentionSplitMaxRows ? 2 : 1);
  return (rows + chunks - 1) / chunks;
}

// A chunk's rows as attend_rows and the split kernels take them.
struct ChunkRows {
  const float* q[kAttentionMaxRows];
  float* out[kAttentionMaxRows];
  int64_t num_positions[kAttentionMaxRows];
  int64_t max_positions = 0;
};

ChunkRows rows_of(const Chunk& chunk, const AttentionSequence& seq, const float* q, float* out,
                  int64_t num_heads, int64_t group_size, int64_t head_dim) {
  ChunkRows rows;
  for (int64_t i = 0; i < chunk.num_rows; ++i) {
    const int64_t row = chunk.first_row + i;
    const int64_t token = row / group_size;
    const int64_t head = chunk.kv_head * group_size + row % group_size;
    const int64_t offset = ((seq.first_token + token) * num_heads + head) * head_dim;
    rows.q[i] = q + offset;
    rows.out[i] = out + offset;
    rows.num_positions[i] = seq.first_position + token + 1;
    rows.max_positions = std::max(rows.max_positions, rows.num_positions[i]);
  }
  return rows;
}

// The fp32 K/V rows a chunk's kernel reads: the cache's own rows (fp32 caches), or its positions
// decoded into scratch, position p at p * head_dim.
struct StagedRows {
  const float* k;
  const float* v;
  const int64_t* offsets;
};

// Offsets 0, head_dim, 2 * head_dim, ... for at least n positions (scratch rows).
const int64_t* scratch_offsets(int64_t n, int64_t head_dim) {
  thread_local std::vector<int64_t> offsets;
  thread_local int64_t offsets_head_dim = 0;
  if (offsets_head_dim != head_dim) offsets.clear();
  offsets_head_dim = head_dim;
  for (auto p = static_cast<int64_t>(offsets.size()); p < n; ++p) offsets.push_back(p * head_dim);
  return offsets.data();
}

// Decodes positions [p_begin, p_end) of KV head kv_head of `seq` into k_dst / v_dst (position p
// at p * head_dim).
void decode_positions(const IsaKernels& kernels, const KvRows& kv, const AttentionSequence& seq,
                      int64_t kv_head, int64_t head_dim, int64_t p_begin, int64_t p_end,
                      float* k_dst, float* v_dst) {
  const int64_t element_bytes = kv_element_bytes(kv.format);
  const auto* k = static_cast<const unsigned char*>(kv.k);
  const auto* v = static_cast<const unsigned char*>(kv.v);
  for (int64_t p = p_begin; p < p_end; ++p) {
    const int64_t at = (seq.offsets[p] + kv_head * head_dim) * element_bytes;
    decode_kv_row(kernels, kv.format, k + at, k_dst + p * head_dim, head_dim);
    decode_kv_row(kernels, kv.format, v + at, v_dst + p * head_dim, head_dim);
  }
}

// A (sequence, KV head)'s positions decoded by this thread in one attend_sequences call. A
// prefill's chunks of one pair share them: each decodes only the positions the earlier ones did
// not (a 1024-token prompt is ~100 chunks per KV head). Two per thread, as the interleaved chunk
// list hands a thread chunks from both ends (two pairs) in turn.
struct StagedPair {
  uint64_t call = 0;  // the attend_sequences call it belongs to (0: none)
  const AttentionSequence* sequence = nullptr;
  int64_t kv_head = -1;
  int64_t num_positions = 0;  // decoded: [0, num_positions)
  std::vector<float> k, v;
};

// Distinguishes attend_sequences calls (each layer's, each step's): a pair decoded in an earlier
// call holds other rows.
std::atomic<uint64_t> next_call{1};

// A chunk's rows: straight from an fp32 cache, else decoded into this thread's scratch (valid
// until its next call).
StagedRows stage_chunk(const IsaKernels& kernels, const KvRows& kv, uint64_t call,
                       const AttentionSequence& seq, int64_t kv_head, int64_t num_positions,
                       int64_t head_dim) {
  if (kv.format == KvFormat::kF32) {
    return {static_cast<const float*>(kv.k) + kv_head * head_dim,
            static_cast<const float*>(kv.v) + kv_head * head_dim, seq.offsets};
  }
  thread_local StagedPair pairs[2];
  thread_local int victim = 0;
  StagedPair* pair = nullptr;
  for (StagedPair& p : pairs) {
    if (p.call == call && p.sequence == &seq && p.kv_head == kv_head) pair = &p;
  }
  if (pair == nullptr) {
    pair = &pairs[victim];
    victim ^= 1;
    *pair = {call, &seq, kv_head, 0, std::move(pair->k), std::move(pair->v)};
  }
  if (pair->num_positions < num_positions) {
    const auto floats = static_cast<size_t>(num_positions * head_dim);
    if (pair->k.size() < floats) {
      pair->k.resize(floats);  // keeps the positions already decoded
      pair->v.resize(floats);
    }
    decode_positions(kernels, kv, seq, kv_head, head_dim, pair->num_positions, num_positions,
                     pair->k.data(), pair->v.data());
    pair->num_positions = num_positions;
  }
  return {pair->k.data(), pair->v.data(), scratch_offsets(num_positions, head_dim)};
}

// One sequence of a model with few KV heads leaves threads idle when each chunk goes to one
// thread (SmolLM2: 3 KV heads on 2 threads). Its decode chunks are split instead, in two passes
// over the pool: every thread scores a share of each chunk's positions, then runs the softmax and
// the V sums for a share of each chunk's head dims (IsaKernels::attend_scores / attend_values:
// the same bits as one attend_rows call per chunk).
bool split_pays(const IsaKernels& kernels, const std::vector<Chunk>& chunks,
                const std::vector<ChunkRows>& rows, int64_t head_dim) {
  if (kernels.attend_scores == nullptr || kernels.attend_values == nullptr || head_dim % 8 != 0)
    return false;
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (chunks[c].num_rows > kAttentionSplitMaxRows || rows[c].max_positions < kSplitMinPositions)
      return false;
  }
  return true;
}

// Boundary u of [0, n) cut into `parts` shares that start at multiples of 8; the last ends at
// `end` (n itself, or n padded to the scores' row stride).
int64_t share_boundary(int64_t n, int64_t u, int64_t parts, int64_t end) {
  return u == parts ? end : n * u / parts / 8 * 8;
}

void split_chunks(const IsaKernels& kernels, const std::vector<Chunk>& chunks,
                  const std::vector<ChunkRows>& rows, const AttentionSequence* sequences,
                  const KvRows& kv, int64_t head_dim, float scale, ThreadPool& pool) {
  const auto num_chunks = static_cast<int64_t>(chunks.size());
  const int64_t threads = pool.num_threads();
  // K/V rows of chunk c's KV head: element offsets from these, read in place in the cache's
  // format.
  const int64_t element_bytes = kv_element_bytes(kv.format);
  const auto head_base = [&](const void* base, int64_t c) {
    return static_cast<const unsigned char*>(base) + chunks[c].kv_head * head_dim * element_bytes;
  };
  // Scores of chunk c: num_rows rows of strides[c] floats (positions padded to a multiple of 8).
  std::vector<int64_t> strides(static_cast<size_t>(num_chunks));
  std::vector<int64_t> first_score(static_cast<size_t>(num_chunks) + 1, 0);
  for (int64_t c = 0; c < num_chunks; ++c) {
    strides[c] = (rows[c].max_positions + 7) / 8 * 8;
    first_score[c + 1] = first_score[c] + chunks[c].num_rows * strides[c];
  }
  std::vector<float> scores(static_cast<size_t>(first_score[num_chunks]));
  // Pass 1: item t * num_chunks + c scores share t of chunk c's positions (thread t's items are
  // the same positions of every KV head: neighbouring bytes of the same cache slots).
  pool.parallel_for(threads * num_chunks, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / num_chunks, c = item % num_chunks;
      const int64_t p_begin = share_boundary(rows[c].max_positions, t, threads, strides[c]);
      const int64_t p_end = share_boundary(rows[c].max_positions, t + 1, threads, strides[c]);
      if (p_begin >= p_end) continue;
      kernels.attend_scores(kv.format, rows[c].q, rows[c].num_positions, chunks[c].num_rows,
                            head_base(kv.k, c), sequences[chunks[c].sequence].offsets, head_dim,
                            scale, p_begin, p_end, scores.data() + first_score[c], strides[c]);
    }
  });
  // Pass 2: item c * threads + u: share u of chunk c's head dims.
  pool.parallel_for(num_chunks * threads, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>(attention_rows::scratch_floats(head_dim)));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t c = item / threads, u = item % threads;
      const int64_t d_begin = share_boundary(head_dim, u, threads, head_dim);
      const int64_t d_end = share_boundary(head_dim, u + 1, threads, head_dim);
      if (d_begin >= d_end) continue;
      kernels.attend_values(kv.format, scores.data() + first_score[c], strides[c],
                            rows[c].num_positions, chunks[c].num_rows, head_base(kv.v, c),
                            sequences[chunks[c].sequence].offsets, head_dim, d_begin, d_end,
                            rows[c].out, scratch.data());
    }
  });
}

}  // namespace

void attend_sequences(const IsaKernels& kernels, const float* q, float* out,
                      const AttentionSequence* sequences, int64_t num_sequences, const KvRows& kv,
                      int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                      float softcap, ThreadPool& pool) {
  LM_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0 && head_dim > 0);
  const int64_t group_size = num_heads / num_kv_heads;
  const bool reads_in_place = kv.format != KvFormat::kF32 && softcap == 0.0f && head_dim % 8 == 0 &&
                              kernels.attend_rows_kv != nullptr;
  const bool few_pairs = num_sequences * num_kv_heads < 2 * pool.num_threads();
  std::vector<Chunk> chunks;
  for (int64_t s = 0; s < num_sequences; ++s) {
    const int64_t rows = sequences[s].num_tokens * group_size;
    const int64_t chunk_rows = reads_in_place && rows <= kInPlaceMaxRows
                                   ? in_place_chunk_rows(rows, few_pairs)
                                   : kAttentionMaxRows;
    for (int64_t g = 0; g < num_kv_heads; ++g) {
      for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows)
        chunks.push_back({s, g, r0, std::min(chunk_rows, rows - r0)});
    }
  }
  chunks = interleave_cheap_and_dear(std::move(chunks));
  const uint64_t call = next_call.fetch_add(1, std::memory_order_relaxed);
  if (softcap == 0.0f && pool.num_threads() > 1 &&
      static_cast<int64_t>(chunks.size()) < 2 * pool.num_threads()) {
    std::vector<ChunkRows> rows;
    for (const Chunk& chunk : chunks) {
      rows.push_back(
          rows_of(chunk, sequences[chunk.sequence], q, out, num_heads, group_size, head_dim));
    }
    if (split_pays(kernels, chunks, rows, head_dim)) {
      split_chunks(kernels, chunks, rows, sequences, kv, head_dim, scale, pool);
      return;
    }
  }

  pool.parallel_for(static_cast<int64_t>(chunks.size()), [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>(attention_rows::scratch_floats(head_dim)));
    for (int64_t c = begin; c < end; ++c) {
      const Chunk& chunk = chunks[static_cast<size_t>(c)];
      const ChunkRows r =
          rows_of(chunk, sequences[chunk.sequence], q, out, num_heads, group_size, head_dim);
      // A decode group (or a short entry's chunk) over a 16/8-bit cache: read in place (no
      // scratch round trip).
      if (reads_in_place && chunk.num_rows <= kAttentionInPlaceMaxRows) {
        const int64_t at = chunk.kv_head * head_dim * kv_element_bytes(kv.format);
        kernels.attend_rows_kv(kv.format, r.q, r.out, r.num_positions, chunk.num_rows,
                               static_cast<const unsigned char*>(kv.k) + at,
                               static_cast<const unsigned char*>(kv.v) + at,
                               sequences[chunk.sequence].offsets, head_dim, scale, scratch.data());
        continue;
      }
      const StagedRows kv_rows = stage_chunk(kernels, kv, call, sequences[chunk.sequence],
                                             chunk.kv_head, r.max_positions, head_dim);
      if (softcap > 0.0f) {
        kernels.attend_rows_softcapped(r.q, r.out, r.num_positions, chunk.num_rows, kv_rows.k,
                                       kv_rows.v, kv_rows.offsets, head_dim, scale, softcap,
                                       scratch.data());
      } else {
        kernels.attend_rows(r.q, r.out, r.num_positions, chunk.num_rows, kv_rows.k, kv_rows.v,
                            kv_rows.offsets, head_dim, scale, scratch.data());
      }
    }
  });
}

}  // namespace lm::kernels
