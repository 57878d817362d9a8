// Paged attention against a naive gather-then-attend reference in double precision (MHA and GQA,
// several sequences, shuffled non-contiguous blocks, first_position > 0), bit-equality with the
// contiguous attention_causal under the identity layout, and store_kv's slot writes.
#include "kernels/cpu/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"

namespace lm::kernels {
namespace {

struct SeqCase {
  int64_t first_position, num_tokens;
};

struct Case {
  int64_t num_heads, num_kv_heads, head_dim, block_size;
  std::vector<SeqCase> seqs;
  int64_t sliding_window = 0;  // 0: full causal attention
  float softcap = 0.0f;        // 0: scores as they are
};

// A flat batch over a pool whose blocks are handed out in shuffled order (block 0 never used), so
// every sequence's blocks are scattered; unused slots hold NaN and must never be read.
struct PagedBatch {
  int64_t num_blocks = 0, max_blocks = 0, kv_row = 0;
  std::vector<float> q, k_pool, v_pool;
  std::vector<int32_t> query_begins{0}, first_positions, block_tables;
};

PagedBatch make_batch(const Case& c, uint32_t seed) {
  PagedBatch b;
  b.kv_row = c.num_kv_heads * c.head_dim;
  std::vector<int64_t> blocks_needed;
  for (const SeqCase& s : c.seqs) {
    const int64_t n = (s.first_position + s.num_tokens + c.block_size - 1) / c.block_size;
    blocks_needed.push_back(n);
    b.max_blocks = std::max(b.max_blocks, n);
    b.num_blocks += n;
    b.query_begins.push_back(b.query_begins.back() + static_cast<int32_t>(s.num_tokens));
    b.first_positions.push_back(static_cast<int32_t>(s.first_position));
  }
  b.num_blocks += 3;  // block 0 plus two spare blocks nobody owns
  std::vector<int32_t> ids(static_cast<size_t>(b.num_blocks - 1));
  std::iota(ids.begin(), ids.end(), 1);
  std::mt19937 rng(seed);
  std::shuffle(ids.begin(), ids.end(), rng);
  b.block_tables.assign(c.seqs.size() * static_cast<size_t>(b.max_blocks), 0);
  size_t next = 0;
  const int64_t slots = b.num_blocks * c.block_size;
  b.k_pool.assign(static_cast<size_t>(slots * b.kv_row), NAN);
  b.v_pool.assign(static_cast<size_t>(slots * b.kv_row), NAN);
  const auto k_values = testing::random_floats(slots * b.kv_row, seed + 1, -2.0f, 2.0f);
  const auto v_values = testing::random_floats(slots * b.kv_row, seed + 2);
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    for (int64_t i = 0; i < blocks_needed[s]; ++i)
      b.block_tables[s * static_cast<size_t>(b.max_blocks) + static_cast<size_t>(i)] = ids[next++];
    for (int64_t p = 0; p < c.seqs[s].first_position + c.seqs[s].num_tokens; ++p) {
      const int64_t slot = b.block_tables[s * static_cast<size_t>(b.max_blocks) +
                                          static_cast<size_t>(p / c.block_size)] *
                               c.block_size +
                           p % c.block_size;
      for (int64_t e = 0; e < b.kv_row; ++e) {
        b.k_pool[static_cast<size_t>(slot * b.kv_row + e)] = k_values[slot * b.kv_row + e];
        b.v_pool[static_cast<size_t>(slot * b.kv_row + e)] = v_values[slot * b.kv_row + e];
      }
    }
  }
  b.q = testing::random_floats(b.query_begins.back() * c.num_heads * c.head_dim, seed + 3, -2.0f,
                               2.0f);
  return b;
}

void check_paged(const Case& c, Isa isa, ThreadPool& pool, uint32_t seed) {
  SCOPED_TRACE(std::string(isa_name(isa)) + " heads=" + std::to_string(c.num_heads) + "/" +
               std::to_string(c.num_kv_heads) + " block_size=" + std::to_string(c.block_size));
  const PagedBatch b = make_batch(c, seed);
  const auto num_seqs = static_cast<int64_t>(c.seqs.size());
  std::vector<float> out(b.q.size(), -5.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  paged_attention(b.q.data(), b.k_pool.data(), b.v_pool.data(), out.data(), b.query_begins.data(),
                  b.first_positions.data(), b.block_tables.data(), b.max_blocks, num_seqs,
                  c.num_heads, c.num_kv_heads, c.head_dim, c.block_size,
                  {scale, c.sliding_window, c.softcap}, pool, isa);

  const int64_t group = c.num_heads / c.num_kv_heads;
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int64_t num_positions = c.seqs[s].first_position + c.seqs[s].num_tokens;
    // Gather this sequence's K/V into contiguous rows, then attend naively.
    std::vector<float> k(static_cast<size_t>(num_positions * b.kv_row));
    std::vector<float> v(k.size());
    for (int64_t p = 0; p < num_positions; ++p) {
      const int64_t block =
          b.block_tables[static_cast<size_t>(s * b.max_blocks + p / c.block_size)];
      const int64_t slot = block * c.block_size + p % c.block_size;
      std::copy_n(b.k_pool.begin() + slot * b.kv_row, b.kv_row, k.begin() + p * b.kv_row);
      std::copy_n(b.v_pool.begin() + slot * b.kv_row, b.kv_row, v.begin() + p * b.kv_row);
    }
    for (int64_t i = 0; i < c.seqs[s].num_tokens; ++i) {
      const int64_t row = b.query_begins[static_cast<size_t>(s)] + i;
      const int64_t position = c.seqs[s].first_position + i;
      // Positions [lowest, position]: all of them, or the window's last ones.
      const int64_t lowest =
          c.sliding_window > 0 ? std::max<int64_t>(0, position - c.sliding_window + 1) : 0;
      const int64_t visible = position + 1 - lowest;
      for (int64_t h = 0; h < c.num_heads; ++h) {
        const float* qv = b.q.data() + (row * c.num_heads + h) * c.head_dim;
        const int64_t kv_offset = (h / group) * c.head_dim;
        std::vector<double> p(static_cast<size_t>(visible));
        double max = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          p[j] =
              testing::dot_double(qv, k.data() + (lowest + j) * b.kv_row + kv_offset, c.head_dim) *
              scale;
          if (c.softcap > 0) p[j] = c.softcap * std::tanh(p[j] / c.softcap);
          max = std::max(max, p[j]);
        }
        double sum = 0.0;
        for (double& x : p) sum += (x = std::exp(x - max));
        for (int64_t d = 0; d < c.head_dim; ++d) {
          double expected = 0.0;
          for (int64_t j = 0; j < visible; ++j)
            expected += p[j] / sum * v[(lowest + j) * b.kv_row + kv_offset + d];
          ASSERT_NEAR(out[(row * c.num_heads + h) * c.head_dim + d], expected, 2e-5)
              << "seq " << s << " token " << i << " head " << h << " dim " << d;
        }
      }
    }
  }
}

TEST(PagedAttention, MatchesGatherThenAttendReference) {
  ThreadPool pool(2);
  const Case cases[] = {
      // MHA: two prefills of different lengths, then decodes at various positions.
      {4, 4, 32, 16, {{0, 37}, {0, 5}, {20, 1}, {130, 1}, {64, 1}}},
      // GQA: chunks after cached positions (crossing tiles and blocks), and decodes.
      {8, 2, 64, 16, {{70, 9}, {3, 1}, {0, 1}, {15, 2}}},
      // MQA, odd head_dim, block size 1 and a single sequence.
      {3, 1, 7, 1, {{10, 4}}},
      // Block size not a divisor of the tile, one long prefill after a prefix hit.
      {2, 1, 16, 5, {{33, 70}, {0, 3}}},
  };
  uint32_t seed = 10;
  for (Isa isa : testing::supported_isas()) {
    for (const Case& c : cases) check_paged(c, isa, pool, seed++);
  }
}

// A sliding window w: position p sees [p - w + 1, p] only (transformers' sliding-window mask).
// Prefill chunks that start before, at and past the window, a chunk that crosses it, decodes far
// past it, and windows of 1 and of exactly the sequence length.
TEST(PagedAttention, SlidingWindowSeesOnlyTheLastWindowPositions) {
  ThreadPool pool(2);
  const Case cases[] = {
      {4, 2, 32, 16, {{0, 40}, {5, 20}, {100, 1}, {31, 2}, {0, 3}}, 8},
      {8, 2, 64, 16, {{60, 9}, {0, 70}, {300, 1}}, 64},
      {2, 1, 16, 5, {{0, 12}, {9, 1}}, 1},
      {3, 1, 8, 4, {{0, 30}, {29, 1}}, 30},
  };
  uint32_t seed = 90;
  for (Isa isa : testing::supported_isas()) {
    for (const Case& c : cases) check_paged(c, isa, pool, seed++);
  }
}

// Gemma 2's soft-capped scores (cap * tanh(score / cap)), alone and with its local layers'
// sliding window; a small cap makes the tanh bend scores a lot. Decodes (the few-rows path) and
// prefill chunks (the wide one).
TEST(PagedAttention, SoftcappedScoresMatchTheReference) {
  ThreadPool pool(2);
  const Case cases[] = {
      {4, 2, 32, 16, {{0, 40}, {100, 1}, {31, 2}}, 0, 3.0f},
      {8, 2, 64, 16, {{60, 9}, {300, 1}}, 64, 50.0f},
      {4, 1, 24, 5, {{0, 20}, {9, 1}}, 8, 1.5f},
  };
  uint32_t seed = 130;
  for (Isa isa : testing::supported_isas()) {
    for (const Case& c : cases) check_paged(c, isa, pool, seed++);
  }
}

// Few chunks of long sequences (one decode of a model with few KV heads) are split over the
// threads in two passes (attention_work.cc): the result must be the bits of one attend_rows call
// per chunk, which a one-thread pool makes, and match the reference.
TEST(PagedAttention, LongDecodesSplitOverThreadsKeepTheBitsOfOneThread) {
  ThreadPool one(1), two(2), three(3);
  const Case cases[] = {
      {9, 3, 64, 16, {{700, 1}}},  // SmolLM2's shape: 3 KV heads, groups of 3
      {4, 4, 72, 16, {{600, 1}}},  // MHA, head_dim 72 (uneven dim shares)
      {8,
       2,
       64,
       5,
       {{255, 1}, {900, 1}}},       // groups of 4, exactly 256 positions (the split's threshold)
      {2, 1, 16, 16, {{1000, 1}}},  // a share of no head dims at 3 threads
      {2, 1, 32, 16, {{600, 2}}},   // two tokens x 2 heads: rows end at different positions
      {8, 2, 64, 16, {{900, 1}}, 400},  // windowed decode: 400 positions, from 501 on
  };
  uint32_t seed = 40;
  for (Isa isa : testing::supported_isas()) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " heads=" + std::to_string(c.num_heads) + "/" +
                   std::to_string(c.num_kv_heads) + " head_dim=" + std::to_string(c.head_dim));
      const PagedBatch b = make_batch(c, seed);
      const auto num_seqs = static_cast<int64_t>(c.seqs.size());
      std::vector<std::vector<float>> outs;
      for (ThreadPool* pool : {&one, &two, &three}) {
        std::vector<float> out(b.q.size(), -5.0f);
        paged_attention(b.q.data(), b.k_pool.data(), b.v_pool.data(), out.data(),
                        b.query_begins.data(), b.first_positions.data(), b.block_tables.data(),
                        b.max_blocks, num_seqs, c.num_heads, c.num_kv_heads, c.head_dim,
                        c.block_size, {0.1f, c.sliding_window, c.softcap}, *pool, isa);
        outs.push_back(std::move(out));
      }
      EXPECT_EQ(outs[1], outs[0]);
      EXPECT_EQ(outs[2], outs[0]);
      check_paged(c, isa, two, seed);
      check_paged(c, isa, three, seed);
      ++seed;
    }
  }
}

TEST(PagedAttention, IdentityLayoutIsBitIdenticalToContiguousAttention) {
  ThreadPool pool(2);
  const int64_t num_heads = 8, num_kv_heads = 2, head_dim = 64, block_size = 16;
  const int64_t first_position = 75, num_tokens = 60, kv_row = num_kv_heads * head_dim;
  const int64_t num_positions = first_position + num_tokens;
  const int64_t num_blocks = (num_positions + block_size - 1) / block_size;
  const auto q = testing::random_floats(num_tokens * num_heads * head_dim, 1, -2.0f, 2.0f);
  const auto k = testing::random_floats(num_blocks * block_size * kv_row, 2, -2.0f, 2.0f);
  const auto v = testing::random_floats(num_blocks * block_size * kv_row, 3);
  std::vector<int32_t> block_table(static_cast<size_t>(num_blocks));
  std::iota(block_table.begin(), block_table.end(), 0);
  const int32_t query_begins[] = {0, static_cast<int32_t>(num_tokens)};
  const int32_t first_positions[] = {static_cast<int32_t>(first_position)};
  const float scale = 0.125f;
  for (Isa isa : testing::supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> paged(q.size()), contiguous(q.size());
    paged_attention(q.data(), k.data(), v.data(), paged.data(), query_begins, first_positions,
                    block_table.data(), num_blocks, 1, num_heads, num_kv_heads, head_dim,
                    block_size, {scale}, pool, isa);
    attention_causal(q.data(), k.data(), v.data(), contiguous.data(), num_tokens, num_heads,
                     num_kv_heads, head_dim, kv_row, first_position, scale, pool, isa);
    EXPECT_EQ(paged, contiguous);
  }
}

TEST(PagedAttention, OutputMayAliasQuery) {
  ThreadPool pool(2);
  const Case c{4, 2, 16, 4, {{5, 3}, {0, 6}}};
  PagedBatch b = make_batch(c, 77);
  std::vector<float> out(b.q.size());
  paged_attention(b.q.data(), b.k_pool.data(), b.v_pool.data(), out.data(), b.query_begins.data(),
                  b.first_positions.data(), b.block_tables.data(), b.max_blocks, 2, 4, 2, 16, 4,
                  {0.25f}, pool);
  paged_attention(b.q.data(), b.k_pool.data(), b.v_pool.data(), b.q.data(), b.query_begins.data(),
                  b.first_positions.data(), b.block_tables.data(), b.max_blocks, 2, 4, 2, 16, 4,
                  {0.25f}, pool);
  EXPECT_EQ(b.q, out);
}

// A pool in fp16, bf16 or FP8 (--kv-cache-dtype) gives exactly what an fp32 pool holding its
// decoded values gives: decode, prefill chunks, the decode split over threads, windows and
// soft-capping, at every ISA level and thread count.
TEST(PagedAttention, EveryKvFormatGivesTheFp32ResultOfItsDecodedValues) {
  ThreadPool one(1), two(2);
  const Case cases[] = {
      {9, 3, 64, 16, {{700, 1}}},                 // split decode (SmolLM2's shape)
      {8, 2, 64, 16, {{75, 60}, {0, 33}}},        // prefill chunks of 32 rows
      {4, 2, 16, 4, {{5, 3}, {0, 6}}},            // small blocks
      {8, 2, 64, 16, {{900, 1}, {300, 5}}, 400},  // sliding window
      {4, 1, 32, 8, {{40, 7}}, 0, 30.0f},         // soft-capped scores
      // A speculative step's verified tokens (15 and 6 rows, read in place in chunks of up to 8
      // rows that mix tokens), beside a decode; and one such entry alone, of every length (few
      // (sequence, KV head) pairs: 6-15 rows in two chunks of 3-8).
      {9, 3, 64, 16, {{700, 5}, {300, 2}, {500, 1}}},
      {9, 3, 64, 16, {{1000, 5}}},
      {9, 3, 64, 16, {{1000, 2}}},
      {9, 3, 64, 16, {{900, 3}}},
      {9, 3, 64, 16, {{800, 4}}},
      // Many pairs: each (sequence, KV head)'s 5-8 rows in one chunk.
      {8, 8, 64, 16, {{700, 5}, {300, 8}, {200, 7}, {90, 6}}},
      {16, 8, 64, 16, {{400, 3}, {250, 4}}},
  };
  uint32_t seed = 90;
  for (KvFormat format : {KvFormat::kF16, KvFormat::kBF16, KvFormat::kF8E4M3, KvFormat::kF8E5M2}) {
    for (const Case& c : cases) {
      const PagedBatch b = make_batch(c, seed++);
      const auto num_seqs = static_cast<int64_t>(c.seqs.size());
      const auto n = static_cast<int64_t>(b.k_pool.size());
      std::vector<uint8_t> k_encoded(static_cast<size_t>(n * kv_element_bytes(format)));
      std::vector<uint8_t> v_encoded(k_encoded.size());
      encode_kv_row(b.k_pool.data(), k_encoded.data(), n, format);
      encode_kv_row(b.v_pool.data(), v_encoded.data(), n, format);
      std::vector<float> k_decoded(b.k_pool.size()), v_decoded(b.v_pool.size());
      decode_kv_row(scalar_kernels(), format, k_encoded.data(), k_decoded.data(), n);
      decode_kv_row(scalar_kernels(), format, v_encoded.data(), v_decoded.data(), n);
      for (Isa isa : testing::supported_isas()) {
        for (ThreadPool* pool : {&one, &two}) {
          SCOPED_TRACE(std::string(isa_name(isa)) + " format " +
                       std::to_string(static_cast<int>(format)) + " heads " +
                       std::to_string(c.num_heads) + " threads " +
                       std::to_string(pool->num_threads()));
          std::vector<float> expected(b.q.size(), -5.0f), got(b.q.size(), -7.0f);
          const AttentionOptions options{0.125f, c.sliding_window, c.softcap};
          paged_attention(b.q.data(), k_decoded.data(), v_decoded.data(), expected.data(),
                          b.query_begins.data(), b.first_positions.data(), b.block_tables.data(),
                          b.max_blocks, num_seqs, c.num_heads, c.num_kv_heads, c.head_dim,
                          c.block_size, options, *pool, isa);
          paged_attention(b.q.data(), k_encoded.data(), v_encoded.data(), format, got.data(),
                          b.query_begins.data(), b.first_positions.data(), b.block_tables.data(),
                          b.max_blocks, num_seqs, c.num_heads, c.num_kv_heads, c.head_dim,
                          c.block_size, options, *pool, isa);
          EXPECT_EQ(got, expected);
        }
      }
    }
  }
}

TEST(StoreKv, WritesEncodedRowsToTheirSlots) {
  const int64_t kv_dim = 3;
  const std::vector<float> k = {1.0f, 2.5f, -3.0f, 1000.0f, 0.1f, 6.0f};
  const std::vector<float> v = {-1.0f, 0.3f, 7.0f, 8.0f, -9.0f, 0.0f};
  const int64_t slots[] = {2, 0};
  for (KvFormat format : {KvFormat::kF16, KvFormat::kBF16, KvFormat::kF8E4M3, KvFormat::kF8E5M2}) {
    const int64_t row_bytes = kv_dim * kv_element_bytes(format);
    std::vector<uint8_t> k_pool(static_cast<size_t>(3 * row_bytes), 0xAB), v_pool(k_pool);
    store_kv(k.data(), v.data(), slots, k_pool.data(), v_pool.data(), 2, kv_dim, format);
    for (int64_t t = 0; t < 2; ++t) {
      std::vector<uint8_t> k_row(static_cast<size_t>(row_bytes)), v_row(k_row);
      encode_kv_row(k.data() + t * kv_dim, k_row.data(), kv_dim, format);
      encode_kv_row(v.data() + t * kv_dim, v_row.data(), kv_dim, format);
      EXPECT_TRUE(std::equal(k_row.begin(), k_row.end(), k_pool.begin() + slots[t] * row_bytes));
      EXPECT_TRUE(std::equal(v_row.begin(), v_row.end(), v_pool.begin() + slots[t] * row_bytes));
    }
    // Slot 1 was not written.
    EXPECT_TRUE(std::all_of(k_pool.begin() + row_bytes, k_pool.begin() + 2 * row_bytes,
                            [](uint8_t x) { return x == 0xAB; }));
  }
}

// Every table's K/V writes give encode_kv_row's bytes, in every cache format: values past fp16's
// range (clamped, +-inf too), halfway cases (rounded to even), fp16 subnormals, fp32 subnormals,
// signed zeros and NaNs (one quiet NaN; a group of 8 holding one runs the scalar encoder), over
// vector groups and a tail.
TEST(StoreKv, EveryTableWritesTheScalarEncodersBytes) {
  std::vector<float> row = testing::random_floats(203, 11, -300.0f, 300.0f);
  const float specials[] = {65504.0f,
                            65519.0f,
                            65520.0f,
                            1e6f,
                            -1e6f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            1.0f + 1.0f / 2048.0f,
                            1.0f + 3.0f / 2048.0f,
                            3.0e-5f,
                            -6.0e-8f,
                            2.98e-8f,
                            1e-40f,
                            -0.0f,
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::bit_cast<float>(0x7fa00000u)};  // a NaN with a payload
  for (size_t i = 0; i < std::size(specials); ++i) row[3 + 11 * i] = specials[i];
  const int64_t kv_dim = static_cast<int64_t>(row.size());
  const int64_t slots[] = {1, 0};
  std::vector<float> k(row);
  k.insert(k.end(), row.rbegin(), row.rend());  // two tokens: row, then reversed (K and V both)
  for (KvFormat format : {KvFormat::kF16, KvFormat::kBF16, KvFormat::kF8E4M3, KvFormat::kF8E5M2}) {
    const int64_t row_bytes = kv_dim * kv_element_bytes(format);
    std::vector<uint8_t> expected(static_cast<size_t>(2 * row_bytes));
    for (int64_t t = 0; t < 2; ++t)
      encode_kv_row(k.data() + t * kv_dim, expected.data() + slots[t] * row_bytes, kv_dim, format);
    for (Isa isa : testing::supported_isas()) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " format " +
                   std::to_string(static_cast<int>(format)));
      std::vector<uint8_t> k_pool(expected.size(), 0xAB), v_pool(expected.size(), 0xAB);
      store_kv(k.data(), k.data(), slots, k_pool.data(), v_pool.data(), 2, kv_dim, format, isa);
      EXPECT_EQ(k_pool, expected);
      EXPECT_EQ(v_pool, expected);
    }
  }
}

TEST(StoreKv, WritesEachTokenToItsSlotAndSkipsNegativeSlots) {
  const int64_t kv_dim = 3;
  const std::vector<float> k = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> v = {-1, -2, -3, -4, -5, -6, -7, -8, -9};
  const int64_t slots[] = {4, -1, 1};
  std::vector<float> k_pool(6 * kv_dim, 0.0f), v_pool(6 * kv_dim, 0.0f);
  store_kv(k.data(), v.data(), slots, k_pool.data(), v_pool.data(), 3, kv_dim);
  const std::vector<float> k_expected = {0, 0, 0, 7, 8, 9, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0};
  const std::vector<float> v_expected = {0, 0, 0, -7, -8, -9, 0, 0, 0,
                                         0, 0, 0, -1, -2, -3, 0, 0, 0};
  EXPECT_EQ(k_pool, k_expected);
  EXPECT_EQ(v_pool, v_expected);
}

}  // namespace
}  // namespace lm::kernels
