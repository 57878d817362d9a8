// The sampler's scans over a row of logits (IsaKernels::sanitize_scores, first_max) written once
// against the lane_math.h policies. Each lane makes the scalar table's comparisons on its share
// of the row, so the results are the scalar table's at every level: the same values, the same
// index. Once per sampled token over the whole vocabulary (49152-151936 ids) on the engine
// thread while the pool waits: one value at a time they took ~75 us a row on SmolLM2.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/cpu/lane_math.h"

namespace lm::kernels::lanes {
namespace {

// NaN to -inf (the policies' max returns its second operand when the first is NaN), then +inf to
// the largest float.
template <typename V>
void sanitize_scores(float* x, int64_t n) {
  const auto sanitized = [](auto tag, const float* p) {
    using P = decltype(tag);
    constexpr float kMax = std::numeric_limits<float>::max();
    const auto y = P::max(P::load(p), P::set1(-std::numeric_limits<float>::infinity()));
    return P::select(P::less(P::set1(kMax), y), P::set1(kMax), y);
  };
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) V::store(x + i, sanitized(V{}, x + i));
  for (; i < n; ++i) Scalar::store(x + i, sanitized(Scalar{}, x + i));
}

// Lane l keeps the largest value of ids l, l + kLanes, ... and where it first appeared (strictly
// larger replaces, so NaN never does and the first of equals stays); then the lanes' winners
// give the largest value at the lowest id, and the tail (higher ids) replaces it only when
// strictly larger. Ids are carried as floats: exact below 2^24 (activations.h checks).
template <typename V>
int64_t first_max(const float* x, int64_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  alignas(64) static constexpr float kIota[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                  8, 9, 10, 11, 12, 13, 14, 15};
  static_assert(V::kLanes <= 16);
  auto best = V::set1(kNegInf), at = V::set1(-1.0f), id = V::load(kIota);
  const auto step = V::set1(static_cast<float>(V::kLanes));
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) {
    const auto v = V::load(x + i);
    const auto larger = V::less(best, v);
    best = V::select(larger, v, best);
    at = V::select(larger, id, at);
    id = V::add(id, step);
  }
  float lane_best[V::kLanes], lane_at[V::kLanes];
  V::store(lane_best, best);
  V::store(lane_at, at);
  float max = kNegInf;
  int64_t found = -1;
  for (int l = 0; l < V::kLanes; ++l) {
    if (lane_at[l] < 0.0f) continue;  // nothing above -inf in this lane
    // A lane that found something holds a value above -inf, so the first such lane always wins.
    const auto lane_id = static_cast<int64_t>(lane_at[l]);
    if (lane_best[l] > max || (lane_best[l] == max && lane_id < found)) {
      max = lane_best[l];
      found = lane_id;
    }
  }
  for (; i < n; ++i) {
    if (x[i] > max) {
      max = x[i];
      found = i;
    }
  }
  return found;
}

}  // namespace
}  // namespace lm::kernels::lanes
