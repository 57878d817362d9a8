// The sum of exps of a softmax's normaliser (IsaKernels::sum_exp) written once against the
// lane_math.h policies, with the polynomial exp; the scalar table keeps libm's exps summed in
// order as the reference.
#pragma once

#include <cstdint>

#include "kernels/cpu/lane_math.h"

namespace lm::kernels::lanes {
namespace {

// sum over i < n of exp(x[i] - shift), every x[i] <= shift (shift: their max, a softmax's
// normaliser): the exps from exp_nonpositive, a term below e^-87 (a -inf score's) counted as 0;
// added in float lanes over stretches of 256 values, and each stretch's lanes into a double. The
// tail runs the same operations one lane at a time.
template <typename V>
double sum_exp(const float* x, int64_t n, float shift) {
  constexpr int64_t kStretch = 256;
  static_assert(kStretch % V::kLanes == 0);
  const auto term = [shift](auto tag, const float* p) {
    using P = decltype(tag);
    const auto d = P::sub(P::load(p), P::set1(shift));
    return P::select(P::less(d, P::set1(-87.0f)), P::zero(), exp_nonpositive<P>(d));
  };
  double total = 0.0;
  int64_t i = 0;
  for (; i + kStretch <= n; i += kStretch) {
    auto acc = V::zero();
    for (int64_t j = 0; j < kStretch; j += V::kLanes) acc = V::add(acc, term(V{}, x + i + j));
    float lanes[V::kLanes];
    V::store(lanes, acc);
    for (const float lane : lanes) total += lane;
  }
  for (; i < n; ++i) total += term(Scalar{}, x + i);
  return total;
}

}  // namespace
}  // namespace lm::kernels::lanes
