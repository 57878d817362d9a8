// Paged decode attention (with and without the split-context path) and varlen paged prefill
// attention against the CPU's paged_attention, through shuffled block tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/thread_pool.h"
#include "cuda_test_util.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cuda/paged_decode_attention.h"
#include "kernels/cuda/paged_prefill_attention.h"

namespace lm::kernels::cuda {
namespace {

using testing::CudaKernelTest;
using testing::DeviceBuffer;
using testing::expect_near_all;
using testing::random_floats;

using AttentionTest = CudaKernelTest;

struct Shape {
  int64_t num_heads, num_kv_heads, head_dim, block_size;
};

// A pool of random K/V rows and per-sequence block tables drawn from a shuffled block list, so
// every sequence's positions are scattered over the pool as they are after real allocation.
struct PagedCache {
  int64_t max_blocks_per_seq = 0;
  std::vector<float> k_pool, v_pool;
  std::vector<int32_t> block_tables;

  PagedCache(const Shape& s, const std::vector<int64_t>& seq_lens, uint32_t seed) {
    for (int64_t len : seq_lens)
      max_blocks_per_seq = std::max(max_blocks_per_seq, (len + s.block_size - 1) / s.block_size);
    const int64_t num_blocks = max_blocks_per_seq * static_cast<int64_t>(seq_lens.size()) + 3;
    std::vector<int32_t> order(num_blocks);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    block_tables.assign(seq_lens.size() * max_blocks_per_seq, -1);
    size_t next = 0;
    for (size_t seq = 0; seq < seq_lens.size(); ++seq) {
      const int64_t used = (seq_lens[seq] + s.block_size - 1) / s.block_size;
      for (int64_t b = 0; b < used; ++b) block_tables[seq * max_blocks_per_seq + b] = order[next++];
      for (int64_t b = used; b < max_blocks_per_seq; ++b)
        block_tables[seq * max_blocks_per_seq + b] = 0;  // never read
    }
    const int64_t floats = num_blocks * s.block_size * s.num_kv_heads * s.head_dim;
    k_pool = random_floats(floats, seed + 1, -1, 1);
    v_pool = random_floats(floats, seed + 2, -1, 1);
  }
};

// The CPU's paged attention (scalar table) on the same cache: the reference both kernels match.
std::vector<float> cpu_attention(const Shape& s, const PagedCache& cache,
                                 const std::vector<float>& q,
                                 const std::vector<int32_t>& query_begins,
                                 const std::vector<int32_t>& first_positions, int64_t num_seqs,
                                 float scale) {
  std::vector<float> out(q.size());
  ThreadPool pool(0);
  kernels::paged_attention(q.data(), cache.k_pool.data(), cache.v_pool.data(), out.data(),
                           query_begins.data(), first_positions.data(), cache.block_tables.data(),
                           cache.max_blocks_per_seq, num_seqs, s.num_heads, s.num_kv_heads,
                           s.head_dim, s.block_size, {scale}, pool, Isa::kScalar);
  return out;
}

// Decode: one query per sequence at its last position; compared with the CPU kernel given one
// query row per sequence.
void check_decode(const Shape& s, const std::vector<int64_t>& context_lens, uint32_t seed) {
  SCOPED_TRACE("heads " + std::to_string(s.num_heads) + "/" + std::to_string(s.num_kv_heads) +
               " d " + std::to_string(s.head_dim) + " bs " + std::to_string(s.block_size));
  const int64_t num_seqs = static_cast<int64_t>(context_lens.size());
  PagedCache cache(s, context_lens, seed);
  const auto q = random_floats(num_seqs * s.num_heads * s.head_dim, seed + 3, -2, 2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));

  std::vector<int32_t> query_begins(num_seqs + 1), first_positions(num_seqs), lens(num_seqs);
  for (int64_t i = 0; i <= num_seqs; ++i) query_begins[i] = static_cast<int32_t>(i);
  for (int64_t i = 0; i < num_seqs; ++i) {
    first_positions[i] = static_cast<int32_t>(context_lens[i] - 1);
    lens[i] = static_cast<int32_t>(context_lens[i]);
  }
  const std::vector<float> expected =
      cpu_attention(s, cache, q, query_begins, first_positions, num_seqs, scale);

  const int64_t max_len = *std::max_element(context_lens.begin(), context_lens.end());
  DeviceBuffer<float> d_q(q), d_k(cache.k_pool), d_v(cache.v_pool), d_out(q.size());
  DeviceBuffer<int32_t> d_lens(lens), d_tables(cache.block_tables);
  DeviceBuffer<float> d_work(
      decode_attention_workspace_floats(num_seqs, s.num_heads, s.head_dim, max_len));
  paged_decode_attention(d_q.get(), d_k.get(), d_v.get(), d_out.get(), d_lens.get(), d_tables.get(),
                         cache.max_blocks_per_seq, num_seqs, s.num_heads, s.num_kv_heads,
                         s.head_dim, s.block_size, scale, max_len, d_work.get(), nullptr);
  // Outputs are convex combinations of V values in [-1, 1]; the score sums and softmax sums are
  // ordered differently (tiles of 64 vs partitions of 512 merged by rescaling), so errors are a
  // few ulp of the exponent weights: 2e-5 absolute leaves room for 64k-position contexts.
  expect_near_all(d_out.download(), expected, 2e-5f, 1e-4f, "decode");
}

TEST_F(AttentionTest, DecodeMatchesCpuShortContexts) {
  check_decode({8, 8, 64, 16}, {1, 2, 15, 16, 17, 100}, 20);   // MHA, odd lengths, block edges
  check_decode({32, 8, 128, 16}, {7, 33, 250, 511, 512}, 21);  // GQA 4:1, one partition
  check_decode({14, 2, 64, 32}, {3, 130}, 22);                 // GQA 7:1
  check_decode({4, 1, 96, 8}, {1, 29}, 23);                    // MQA, head_dim not a warp multiple
}

TEST_F(AttentionTest, DecodeSplitsLongContextsAndMergesExactly) {
  // 513 is one position into a second partition; 4100 and 9000 use 9 and 18 partitions, mixed
  // with a short sequence whose extra partitions must stay unused.
  check_decode({32, 8, 128, 16}, {513, 4100, 9000, 5}, 24);
  check_decode({8, 2, 64, 256}, {16384, 1025}, 25);
}

// Prefill: varlen query chunks whose K/V (including the chunk's own) are already in the cache.
void check_prefill(const Shape& s, const std::vector<int64_t>& query_lens,
                   const std::vector<int64_t>& first_positions_in, uint32_t seed) {
  SCOPED_TRACE("heads " + std::to_string(s.num_heads) + "/" + std::to_string(s.num_kv_heads) +
               " d " + std::to_string(s.head_dim));
  const int64_t num_seqs = static_cast<int64_t>(query_lens.size());
  std::vector<int64_t> seq_lens(num_seqs);
  std::vector<int32_t> query_begins(num_seqs + 1, 0), first_positions(num_seqs);
  for (int64_t i = 0; i < num_seqs; ++i) {
    seq_lens[i] = first_positions_in[i] + query_lens[i];
    query_begins[i + 1] = static_cast<int32_t>(query_begins[i] + query_lens[i]);
    first_positions[i] = static_cast<int32_t>(first_positions_in[i]);
  }
  PagedCache cache(s, seq_lens, seed);
  const int64_t num_tokens = query_begins[num_seqs];
  const auto q = random_floats(num_tokens * s.num_heads * s.head_dim, seed + 3, -2, 2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const std::vector<float> expected =
      cpu_attention(s, cache, q, query_begins, first_positions, num_seqs, scale);
  const int64_t max_query_len = *std::max_element(query_lens.begin(), query_lens.end());
  DeviceBuffer<float> d_q(q), d_k(cache.k_pool), d_v(cache.v_pool);
  DeviceBuffer<int32_t> d_begins(query_begins), d_first(first_positions),
      d_tables(cache.block_tables);
  // In place (out aliases q), as the model runner will call it.
  paged_prefill_attention(d_q.get(), d_k.get(), d_v.get(), d_q.get(), d_begins.get(), d_first.get(),
                          d_tables.get(), cache.max_blocks_per_seq, num_seqs, s.num_heads,
                          s.num_kv_heads, s.head_dim, s.block_size, scale, max_query_len, nullptr);
  // Same argument as decode: only the summation order differs (tiles of 32 vs 64).
  expect_near_all(d_q.download(), expected, 2e-5f, 1e-4f, "prefill");
}

TEST_F(AttentionTest, PrefillMatchesCpuForVarlenBatches) {
  // Whole prompts of odd lengths, one a single token (a decode row in a mixed batch).
  check_prefill({8, 8, 64, 16}, {1, 17, 33, 100}, {0, 0, 0, 0}, 30);
  // GQA with chunked prefill: chunks starting deep in their sequence, multiple blocks.
  check_prefill({32, 8, 128, 16}, {64, 5, 129}, {0, 300, 1000}, 31);
  // head_dim 96 (masked lanes) and 256 (large shared-memory opt-in), MQA.
  check_prefill({6, 2, 96, 32}, {40, 3}, {7, 60}, 32);
  check_prefill({4, 1, 256, 16}, {50, 2}, {0, 77}, 33);
}

TEST_F(AttentionTest, PrefillHandlesLongPrompts) {
  check_prefill({16, 4, 128, 16}, {1024, 300}, {500, 0}, 34);
}

}  // namespace
}  // namespace lm::kernels::cuda
