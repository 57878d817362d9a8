// Causal attention: one (token, head) pair per work item; each walks its visible positions in
// tiles, keeping a running max and denominator so the output is rescaled instead of recomputed.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/check.h"

namespace lm::kernels {
namespace {

// Positions scored per tile; 64 scores stay in L1 next to one head's accumulator.
constexpr int64_t kPositionTile = 64;

}  // namespace

void attention_causal(const float* q, const float* k_cache, const float* v_cache, float* out,
                      int64_t num_tokens, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                      int64_t kv_row_stride, int64_t first_position, float scale, ThreadPool& pool,
                      Isa isa) {
  LM_CHECK(num_tokens >= 0 && head_dim > 0 && first_position >= 0);
  LM_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0);
  LM_CHECK(kv_row_stride >= num_kv_heads * head_dim);
  const IsaKernels& kernels = isa_kernels(isa);
  const int64_t group_size = num_heads / num_kv_heads;

  pool.parallel_for(num_tokens * num_heads, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(kPositionTile);
    std::vector<float> acc(static_cast<size_t>(head_dim));  // unnormalized sum of p * v
    for (int64_t item = begin; item < end; ++item) {
      const int64_t token = item / num_heads;
      const int64_t head = item % num_heads;
      const int64_t kv_offset = (head / group_size) * head_dim;
      const float* qv = q + item * head_dim;
      std::fill(acc.begin(), acc.end(), 0.0f);
      const int64_t num_positions = first_position + token + 1;
      float running_max = -std::numeric_limits<float>::infinity();
      float denominator = 0.0f;
      for (int64_t p0 = 0; p0 < num_positions; p0 += kPositionTile) {
        const int64_t tile = std::min(kPositionTile, num_positions - p0);
        float tile_max = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < tile; ++j) {
          const float* kv = k_cache + (p0 + j) * kv_row_stride + kv_offset;
          scores[j] = kernels.dot_f32(qv, kv, head_dim) * scale;
          tile_max = std::max(tile_max, scores[j]);
        }
        if (tile_max > running_max) {
          // exp(-inf) = 0 on the first tile, where acc and denominator are still zero.
          const float correction = std::exp(running_max - tile_max);
          kernels.scale_f32(correction, acc.data(), head_dim);
          denominator *= correction;
          running_max = tile_max;
        }
        for (int64_t j = 0; j < tile; ++j) {
          const float p = std::exp(scores[j] - running_max);
          denominator += p;
          kernels.axpy_f32(p, v_cache + (p0 + j) * kv_row_stride + kv_offset, acc.data(), head_dim);
        }
      }
      const float inv_denominator = 1.0f / denominator;
      float* o = out + item * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) o[d] = acc[d] * inv_denominator;
    }
  });
}

}  // namespace lm::kernels
