// Causal attention against a naive softmax(q K^T * scale) V in double precision: MHA and GQA,
// prefill from position 0, a chunk after cached positions, decode, padded cache rows, every ISA;
// and the row-chunk kernel's batch invariance (a row's result is the same bits in any company).
#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/attention_rows.h"

namespace lm::kernels {
namespace {

struct Case {
  int64_t num_tokens, num_heads, num_kv_heads, head_dim, first_position, row_padding;
};

std::string describe(const Case& c, Isa isa) {
  return std::string(isa_name(isa)) + " tokens=" + std::to_string(c.num_tokens) +
         " heads=" + std::to_string(c.num_heads) + "/" + std::to_string(c.num_kv_heads) +
         " head_dim=" + std::to_string(c.head_dim) + " first=" + std::to_string(c.first_position);
}

void check_attention(const Case& c, Isa isa, ThreadPool& pool) {
  SCOPED_TRACE(describe(c, isa));
  const int64_t num_positions = c.first_position + c.num_tokens;
  const int64_t stride = c.num_kv_heads * c.head_dim + c.row_padding;
  const int64_t q_size = c.num_tokens * c.num_heads * c.head_dim;
  const auto q = testing::random_floats(q_size, 1, -2.0f, 2.0f);
  // One extra cache row past the last visible position: it must never be read.
  auto k_cache = testing::random_floats((num_positions + 1) * stride, 2, -2.0f, 2.0f);
  auto v_cache = testing::random_floats((num_positions + 1) * stride, 3);
  for (int64_t i = num_positions * stride; i < (num_positions + 1) * stride; ++i) {
    k_cache[i] = NAN;
    v_cache[i] = NAN;
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  std::vector<float> out(static_cast<size_t>(q_size), -5.0f);
  attention_causal(q.data(), k_cache.data(), v_cache.data(), out.data(), c.num_tokens, c.num_heads,
                   c.num_kv_heads, c.head_dim, stride, c.first_position, scale, pool, isa);

  const int64_t group = c.num_heads / c.num_kv_heads;
  for (int64_t t = 0; t < c.num_tokens; ++t) {
    for (int64_t h = 0; h < c.num_heads; ++h) {
      const float* qv = q.data() + (t * c.num_heads + h) * c.head_dim;
      const int64_t kv_offset = (h / group) * c.head_dim;
      const int64_t visible = c.first_position + t + 1;
      std::vector<double> p(static_cast<size_t>(visible));
      double max = -INFINITY;
      for (int64_t j = 0; j < visible; ++j) {
        p[j] = testing::dot_double(qv, k_cache.data() + j * stride + kv_offset, c.head_dim) * scale;
        max = std::max(max, p[j]);
      }
      double sum = 0.0;
      for (double& v : p) sum += (v = std::exp(v - max));
      for (int64_t d = 0; d < c.head_dim; ++d) {
        double expected = 0.0;
        for (int64_t j = 0; j < visible; ++j)
          expected += p[j] / sum * v_cache[j * stride + kv_offset + d];
        const float got = out[(t * c.num_heads + h) * c.head_dim + d];
        ASSERT_NEAR(got, expected, 2e-5) << "token " << t << " head " << h << " dim " << d;
      }
    }
  }
}

TEST(Attention, MatchesNaiveReference) {
  ThreadPool pool(2);
  const Case cases[] = {
      {37, 4, 4, 64, 0, 0},   // MHA prefill
      {37, 8, 2, 64, 0, 0},   // GQA prefill
      {5, 9, 3, 80, 70, 16},  // chunk after cached positions, crosses a tile, padded rows
      {1, 8, 2, 64, 200, 0},  // decode
      {1, 3, 1, 7, 0, 0},     // single position, odd head_dim, MQA
      {130, 2, 1, 32, 3, 5},  // several tiles per query
  };
  for (Isa isa : testing::supported_isas()) {
    for (const Case& c : cases) check_attention(c, isa, pool);
  }
}

TEST(Attention, OutputMayAliasQuery) {
  ThreadPool pool(2);
  const int64_t head_dim = 16, heads = 2, tokens = 3;
  const auto q = testing::random_floats(tokens * heads * head_dim, 4);
  const auto k = testing::random_floats(tokens * heads * head_dim, 5);
  const auto v = testing::random_floats(tokens * heads * head_dim, 6);
  std::vector<float> out(q.size());
  attention_causal(q.data(), k.data(), v.data(), out.data(), tokens, heads, heads, head_dim,
                   heads * head_dim, 0, 0.25f, pool);
  std::vector<float> in_place = q;
  attention_causal(in_place.data(), k.data(), v.data(), in_place.data(), tokens, heads, heads,
                   head_dim, heads * head_dim, 0, 0.25f, pool);
  EXPECT_EQ(in_place, out);
}

TEST(Attention, FirstTokenReturnsFirstValue) {
  // With one visible position the softmax weight is exactly 1.
  ThreadPool pool(1);
  const float q[4] = {1, 2, 3, 4};
  const float k[4] = {5, 6, 7, 8};
  const float v[4] = {0.5f, -1.5f, 2.0f, 3.0f};
  float out[4];
  attention_causal(q, k, v, out, 1, 1, 1, 4, 4, 0, 0.5f, pool);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], v[i]);
}

TEST(AttendRows, ARowGivesTheSameBitsAloneOrInAnyGroupOnEveryIsa) {
  // 72: not a multiple of 16 (remainder loops); 64: a common head size; 20: not a multiple of 8
  // (groups of up to 4 rows cannot put positions in lanes).
  for (int64_t head_dim : {72, 64, 20}) {
    SCOPED_TRACE("head_dim=" + std::to_string(head_dim));
    constexpr int64_t positions = 150;
    const auto q = testing::random_floats(kAttentionMaxRows * head_dim, 11, -2.0f, 2.0f);
    const auto k = testing::random_floats(positions * head_dim, 12, -2.0f, 2.0f);
    const auto v = testing::random_floats(positions * head_dim, 13);
    // Positions in shuffled slots, as a paged cache's block table gives them.
    std::vector<int64_t> offsets(positions);
    for (int64_t p = 0; p < positions; ++p) offsets[p] = ((p * 61) % positions) * head_dim;
    // Rows see different numbers of positions (a causal chunk), some inside one tile, some not.
    std::vector<int64_t> limits(kAttentionMaxRows);
    for (int64_t r = 0; r < kAttentionMaxRows; ++r) limits[r] = 1 + (r * 37) % positions;
    std::vector<float> scratch(attention_rows::scratch_floats(head_dim));
    std::vector<float> scalar_all;
    for (Isa isa : testing::supported_isas()) {
      SCOPED_TRACE(isa_name(isa));
      const IsaKernels& kernels = isa_kernels(isa);
      const auto run = [&](int64_t first, int64_t count) {
        std::vector<float> out(static_cast<size_t>(count * head_dim));
        std::vector<const float*> q_rows;
        std::vector<float*> out_rows;
        for (int64_t r = 0; r < count; ++r) {
          q_rows.push_back(q.data() + (first + r) * head_dim);
          out_rows.push_back(out.data() + r * head_dim);
        }
        kernels.attend_rows(q_rows.data(), out_rows.data(), limits.data() + first, count, k.data(),
                            v.data(), offsets.data(), head_dim, 0.125f, scratch.data());
        return out;
      };
      const auto all = run(0, kAttentionMaxRows);
      for (int64_t count : {1, 2, 3, 4, 5, 8, 11, 16, 17, 24}) {
        for (int64_t first = 0; first + count <= kAttentionMaxRows; first += count) {
          const auto some = run(first, count);
          for (int64_t i = 0; i < count * head_dim; ++i)
            ASSERT_EQ(some[i], all[first * head_dim + i]) << "rows " << first << "+" << count;
        }
      }
      // Every ISA gives the scalar table's bits.
      if (isa == Isa::kScalar) scalar_all = all;
      ASSERT_EQ(all, scalar_all);
      // And the values are right: row 0 sees one position, so it returns that V row exactly.
      for (int64_t d = 0; d < head_dim; ++d) EXPECT_EQ(all[d], v[offsets[0] + d]);
    }
  }
}

}  // namespace
}  // namespace lm::kernels
