// SiLU·mul and GELU(tanh)·mul (IsaKernels::silu_mul, gelu_tanh_mul) written once against the
// lane_math.h policies, with the polynomial exp; the scalar table keeps torch's formulas with
// libm's exp / tanh as the reference.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/lane_math.h"

namespace lm::kernels::lanes {
namespace {

// sigmoid(z) from e = exp(-|z|): 1 / (1 + e) for z >= 0, e / (1 + e) below, so nothing overflows.
template <typename P>
typename P::Reg sigmoid(typename P::Reg z) {
  const auto minus_abs = P::sub(P::zero(), P::max(z, P::sub(P::zero(), z)));
  const auto e = exp_nonpositive<P>(minus_abs);
  return P::div(P::select(P::less(z, P::zero()), e, P::set1(1.0f)), P::add(P::set1(1.0f), e));
}

// out[i] = x * sigmoid(z(x)) * up[i] for x = gate[i], `z` the activation's sigmoid argument. The
// tail runs the same operations one lane at a time. out may alias gate or up.
template <typename V, typename Z>
void gated_by_sigmoid(const float* gate, const float* up, float* out, int64_t n, Z z) {
  const auto one_step = [&z](auto tag, const float* g_in, const float* u_in, float* o) {
    using P = decltype(tag);
    const auto x = P::load(g_in);
    P::store(o, P::mul(P::mul(x, sigmoid<P>(z(tag, x))), P::load(u_in)));
  };
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) one_step(V{}, gate + i, up + i, out + i);
  for (; i < n; ++i) one_step(Scalar{}, gate + i, up + i, out + i);
}

// out[i] = silu(gate[i]) * up[i], silu(x) = x * sigmoid(x).
template <typename V>
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  gated_by_sigmoid<V>(gate, up, out, n, [](auto, auto x) { return x; });
}

// out[i] = gelu_tanh(gate[i]) * up[i]. 0.5 * (1 + tanh(u)) is sigmoid(2u), so gelu_tanh(x) =
// x * sigmoid(z) with z = 2 * sqrt(2 / pi) * (x + 0.044715 * x^3).
template <typename V>
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  gated_by_sigmoid<V>(gate, up, out, n, [](auto tag, auto x) {
    using P = decltype(tag);
    constexpr float kTwoBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI);
    constexpr float kKappa = 0.044715f;
    const auto x3 = P::mul(P::mul(x, x), x);
    return P::mul(P::set1(kTwoBeta), P::add(x, P::mul(P::set1(kKappa), x3)));
  });
}

}  // namespace
}  // namespace lm::kernels::lanes
