// Vector "lane" policies for kernels written once and instantiated per ISA (lanes/,
// attention_rows.h): the same operations on 1 (plain C++), 4, 8 or 16 fp32 lanes, so a value
// computed in one lane is the same bits whichever width runs it; and exp for x <= 0 built from
// them. Each policy exists only where its instructions are enabled, and everything is in an unnamed
// namespace: each per-ISA file must get its own copy of these inline functions (an external-linkage
// copy compiled with AVX-512 could otherwise serve the AVX2 table).
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
  static constexpr int kRegisters = 16;  // vector registers without AVX-512
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
  static constexpr int kRegisters = 16;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg x) { _mm256_storeu_ps(p, x); }
  // 8 fp16 / bf16 values as fp32 (exact; F16C is part of every x86 build here).
  static Reg load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static Reg load_bf16(const uint16_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  // 8 FP8 bytes as fp32 (exact): E5M2 is an fp16's top byte; E4M3FN's bits at an fp16's
  // exponent and mantissa places read as its value / 2^8 (kernels/cpu/panels_fp8.h).
  // E4M3 sign-extended to 16 bits and shifted left by 7 has the sign at bit 15 and its other bits
  // at 14..7, bit 14 a copy of the sign: clearing that one leaves the fp16 pattern (3 operations).
  template <bool kE5M2>
  static Reg load_fp8(const uint8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    if constexpr (kE5M2) return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b), 8));
    const __m128i h = _mm_slli_epi16(_mm_cvtepi8_epi16(b), 7);
    return _mm256_cvtph_ps(_mm_and_si128(h, _mm_set1_epi16(static_cast<int16_t>(0xbfff))));
  }
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
  // The sum of the 8 lanes: halves, then pairs, then the last two.
  static float hsum(Reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
#endif

#if defined(__AVX512F__)
// Sixteen lanes.
struct Zmm {
  using Reg = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr int kRegisters = 32;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg x) { _mm512_storeu_ps(p, x); }
  // 16 fp16 / bf16 values as fp32 (exact).
  static Reg load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static Reg load_bf16(const uint16_t* p) {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  // 16 FP8 bytes as fp32, as Ymm::load_fp8.
  template <bool kE5M2>
  static Reg load_fp8(const uint8_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (kE5M2) return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
    const __m256i h = _mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7);
    return _mm512_cvtph_ps(_mm256_and_si256(h, _mm256_set1_epi16(static_cast<int16_t>(0xbfff))));
  }
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
  // Masked loads and stores (only this width has them): lanes [0, n), n <= 16; a load gives 0
  // in the other lanes, a store leaves their memory alone.
  static Mask first_lanes(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static Reg load_masked(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static void store_masked(float* p, Mask m, Reg x) { _mm512_mask_storeu_ps(p, m, x); }
  // The sum of the 16 lanes: halves, then as Ymm::hsum.
  static float hsum(Reg v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm512_castps512_ps256(_mm512_shuffle_f32x4(v, v, 0xEE));
    const __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
    return _mm_cvtss_f32(s4);
  }
};
#endif

// The widest policy this file's build enables: the lane width a per-ISA build of lanes/ uses for
// its compute-bound ops.
#if defined(__AVX512F__)
using Widest = Zmm;
#elif defined(__AVX2__) && defined(__FMA__)
using Widest = Ymm;
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

}  // namespace
}  // namespace lm::kernels::lanes
