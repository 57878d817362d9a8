// Vector "lane" policies for kernels written once and instantiated per ISA (attention_rows.h,
// the SiLU kernels): the same operations on 1 (plain C++), 4, 8 or 16 fp32 lanes, so a value
// computed in one lane is the same bits whichever width runs it; and exp for x <= 0 built from
// them. Each policy exists only where its instructions are enabled, and everything is in an
// unnamed namespace: each per-ISA file must get its own copy of these inline functions (an
// external-linkage copy compiled with AVX-512 could otherwise serve the AVX2 table).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace lm::kernels::lanes {
namespace {

// One lane of plain C++ (the scalar table).
struct Scalar {
  using Reg = float;
  using Mask = bool;
  static constexpr int kLanes = 1;
  static Reg zero() { return 0.0f; }
  static Reg set1(float x) { return x; }
  static Reg load(const float* p) { return *p; }
  static void store(float* p, Reg x) { *p = x; }
  static Reg add(Reg a, Reg b) { return a + b; }
  static Reg sub(Reg a, Reg b) { return a - b; }
  static Reg mul(Reg a, Reg b) { return a * b; }
  static Reg div(Reg a, Reg b) { return a / b; }
  static Reg fmadd(Reg a, Reg b, Reg c) { return std::fma(a, b, c); }
  static Reg fnmadd(Reg a, Reg b, Reg c) { return std::fma(-a, b, c); }
  static Reg max(Reg a, Reg b) { return a > b ? a : b; }
  static Reg round_nearest(Reg x) { return std::nearbyint(x); }
  static Reg pow2(Reg n) { return std::ldexp(1.0f, static_cast<int>(n)); }
  static Mask less(Reg a, Reg b) { return a < b; }
  static Reg select(Mask m, Reg a, Reg b) { return m ? a : b; }
};

#if defined(__AVX2__) && defined(__FMA__)
// Four lanes.
struct Xmm {
  using Reg = __m128;
  using Mask = __m128;
  static constexpr int kLanes = 4;
  static Reg zero() { return _mm_setzero_ps(); }
  static Reg set1(float x) { return _mm_set1_ps(x); }
  static Reg load(const float* p) { return _mm_loadu_ps(p); }
  static void store(float* p, Reg x) { _mm_storeu_ps(p, x); }
  static Reg add(Reg a, Reg b) { return _mm_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm_div_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm_fmadd_ps(a, b, c); }
  static Reg fnmadd(Reg a, Reg b, Reg c) { return _mm_fnmadd_ps(a, b, c); }
  static Reg max(Reg a, Reg b) { return _mm_max_ps(a, b); }
  static Reg round_nearest(Reg x) {
    return _mm_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static Reg pow2(Reg n) {
    return _mm_castsi128_ps(
        _mm_slli_epi32(_mm_add_epi32(_mm_cvtps_epi32(n), _mm_set1_epi32(127)), 23));
  }
  static Mask less(Reg a, Reg b) { return _mm_cmp_ps(a, b, _CMP_LT_OQ); }
  static Reg select(Mask m, Reg a, Reg b) { return _mm_blendv_ps(b, a, m); }
};

// Eight lanes.
struct Ymm {
  using Reg = __m256;
  using Mask = __m256;
  static constexpr int kLanes = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg x) { _mm256_storeu_ps(p, x); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm256_div_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg fnmadd(Reg a, Reg b, Reg c) { return _mm256_fnmadd_ps(a, b, c); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg round_nearest(Reg x) {
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static Reg pow2(Reg n) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static Mask less(Reg a, Reg b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static Reg select(Mask m, Reg a, Reg b) { return _mm256_blendv_ps(b, a, m); }
};
#endif

#if defined(__AVX512F__)
// Sixteen lanes.
struct Zmm {
  using Reg = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg x) { _mm512_storeu_ps(p, x); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm512_div_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg fnmadd(Reg a, Reg b, Reg c) { return _mm512_fnmadd_ps(a, b, c); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg round_nearest(Reg x) {
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static Reg pow2(Reg n) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static Mask less(Reg a, Reg b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static Reg select(Mask m, Reg a, Reg b) { return _mm512_mask_blend_ps(m, b, a); }
};
#endif

// exp(x) for x <= 0 (scores minus their running max): x = n ln2 + r with |r| <= ln2 / 2, a
// degree-6 Taylor polynomial for e^r (relative error < 2e-7), times 2^n built in the exponent
// bits. x is clamped at -87 so 2^n stays a normal number: e^-87 ~ 1.6e-38 stands in for anything
// smaller (a weight that small never shows in an fp32 sum of weights >= 1).
template <typename V>
inline typename V::Reg exp_nonpositive(typename V::Reg x) {
  x = V::max(x, V::set1(-87.0f));
  const auto n = V::round_nearest(V::mul(x, V::set1(1.44269504088896341f)));
  auto r = V::fnmadd(n, V::set1(0.693145751953125f), x);  // ln2, high bits (exact product)
  r = V::fnmadd(n, V::set1(1.42860682030941723e-6f), r);  // ln2, low bits
  auto p = V::set1(1.0f / 720.0f);
  p = V::fmadd(p, r, V::set1(1.0f / 120.0f));
  p = V::fmadd(p, r, V::set1(1.0f / 24.0f));
  p = V::fmadd(p, r, V::set1(1.0f / 6.0f));
  p = V::fmadd(p, r, V::set1(0.5f));
  p = V::fmadd(p, r, V::set1(1.0f));
  p = V::fmadd(p, r, V::set1(1.0f));
  return V::mul(p, V::pow2(n));
}

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
