// SiLU·mul (IsaKernels::silu_mul) written once against the lane_math.h policies, with the
// polynomial exp; the scalar table keeps torch's formula with libm's exp as the reference.
#pragma once

#include <cstdint>

#include "kernels/cpu/lane_math.h"

namespace lm::kernels::lanes {
namespace {

// out[i] = silu(gate[i]) * up[i], silu(x) = x * sigmoid(x) with sigmoid from e = exp(-|x|)
// (1 / (1 + e) for x >= 0, e / (1 + e) below), so nothing overflows. The tail runs the same
// operations one lane at a time. out may alias gate or up.
template <typename V>
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const auto one_step = [](auto tag, const float* g_in, const float* u_in, float* o) {
    using P = decltype(tag);
    const auto g = P::load(g_in);
    const auto minus_abs = P::sub(P::zero(), P::max(g, P::sub(P::zero(), g)));
    const auto e = exp_nonpositive<P>(minus_abs);
    const auto sigmoid =
        P::div(P::select(P::less(g, P::zero()), e, P::set1(1.0f)), P::add(P::set1(1.0f), e));
    P::store(o, P::mul(P::mul(g, sigmoid), P::load(u_in)));
  };
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) one_step(V{}, gate + i, up + i, out + i);
  for (; i < n; ++i) one_step(Scalar{}, gate + i, up + i, out + i);
}

}  // namespace
}  // namespace lm::kernels::lanes
