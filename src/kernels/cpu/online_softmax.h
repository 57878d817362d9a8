// The inner loop both attention kernels share: one query row attends over positions
// [0, num_positions) in tiles, keeping a running max and denominator (flash-attention's online
// softmax) so nothing is recomputed and no score matrix exists. Callers differ only in where
// position p's K/V row lives, which `row_of(p)` answers (a float offset from `k` and `v`).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/isa.h"

namespace lm::kernels {

// Positions scored per tile; 64 scores stay in L1 next to one head's accumulator.
inline constexpr int64_t kAttentionPositionTile = 64;

// scores: kAttentionPositionTile floats of scratch; acc: head_dim floats of scratch; out may
// alias q.
template <typename RowOf>
void attend_row(const IsaKernels& kernels, const float* q, const float* k, const float* v,
                RowOf row_of, int64_t num_positions, int64_t head_dim, float scale, float* scores,
                float* acc, float* out) {
  std::fill(acc, acc + head_dim, 0.0f);  // unnormalized sum of p * v
  float running_max = -std::numeric_limits<float>::infinity();
  float denominator = 0.0f;
  for (int64_t p0 = 0; p0 < num_positions; p0 += kAttentionPositionTile) {
    const int64_t tile = std::min(kAttentionPositionTile, num_positions - p0);
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < tile; ++j) {
      scores[j] = kernels.dot_f32(q, k + row_of(p0 + j), head_dim) * scale;
      tile_max = std::max(tile_max, scores[j]);
    }
    if (tile_max > running_max) {
      // exp(-inf) = 0 on the first tile, where acc and denominator are still zero.
      const float correction = std::exp(running_max - tile_max);
      kernels.scale_f32(correction, acc, head_dim);
      denominator *= correction;
      running_max = tile_max;
    }
    for (int64_t j = 0; j < tile; ++j) {
      const float weight = std::exp(scores[j] - running_max);
      denominator += weight;
      kernels.axpy_f32(weight, v + row_of(p0 + j), acc, head_dim);
    }
  }
  const float inv_denominator = 1.0f / denominator;
  for (int64_t d = 0; d < head_dim; ++d) out[d] = acc[d] * inv_denominator;
}

}  // namespace lm::kernels
