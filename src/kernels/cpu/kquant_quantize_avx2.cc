// The K-quant scale searches with one group per AVX2 lane: the 8 groups of a Q4_K/Q5_K
// super-block, or 8 of the 16 sub-groups of a Q6_K one, side by side. Each lane runs the scalar
// search of kquant_quantize.cc operation for operation (sums in the same order, IEEE division and
// square root, round-half-even, choices made by blending instead of branching), so the result is
// the scalar one bit for bit; built with -ffp-contract=off so no multiply-add is fused.
// NOTE: as in kernels_avx2.cc, only internal-linkage helpers and intrinsics here.
#include "kernels/cpu/kquant_quantize.h"

#include "base/check.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

namespace lm::kernels::kquant {
namespace {

constexpr int kLanes = 8;

__m256 round_even(__m256 v) {
  return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// clamp(round_even(v), lo, hi): GGML's nearest_int and MAX/MIN on integers, as floats (exact:
// the levels are small integers).
__m256 level(__m256 v, __m256 lo, __m256 hi) {
  return _mm256_min_ps(_mm256_max_ps(round_even(v), lo), hi);
}

__m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// Writes lane g of each of the n vectors levels[i] to q[stride * g + i], as integers + bias.
template <typename Q>
void store_levels(const __m256* levels, int n, int stride, int bias, Q* q) {
  alignas(32) float lanes[kLanes];
  for (int i = 0; i < n; ++i) {
    _mm256_store_ps(lanes, levels[i]);
    for (int g = 0; g < kLanes; ++g)
      q[stride * g + i] = static_cast<Q>(static_cast<int>(lanes[g]) + bias);
  }
}

}  // namespace

bool fit_groups_avx2_built() { return true; }

void fit_affine_groups_avx2(const float* x, const AffineSearch& search, AffineFit& fit) {
  static_assert(kGroups == kLanes);
  const __m256i offsets = _mm256_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 levels = _mm256_set1_ps(static_cast<float>(search.levels));
  __m256 xt[kGroupSize];  // xt[i] lane g = x[32 g + i]
  __m256 w[kGroupSize];
  __m256 sum_x2 = zero;
  for (int i = 0; i < kGroupSize; ++i) {
    xt[i] = _mm256_i32gather_ps(x + i, offsets, 4);
    sum_x2 = _mm256_add_ps(sum_x2, _mm256_mul_ps(xt[i], xt[i]));
  }
  const __m256 av_x =
      _mm256_sqrt_ps(_mm256_div_ps(sum_x2, _mm256_set1_ps(static_cast<float>(kGroupSize))));
  for (int i = 0; i < kGroupSize; ++i) w[i] = _mm256_add_ps(av_x, abs_ps(xt[i]));

  __m256 min = xt[0], max = xt[0];
  __m256 sum_w = w[0];
  __m256 sum_x = _mm256_mul_ps(sum_w, xt[0]);
  for (int i = 1; i < kGroupSize; ++i) {
    min = _mm256_min_ps(xt[i], min);  // x < min ? x : min
    max = _mm256_max_ps(xt[i], max);  // x > max ? x : max
    sum_w = _mm256_add_ps(sum_w, w[i]);
    sum_x = _mm256_add_ps(sum_x, _mm256_mul_ps(w[i], xt[i]));
  }
  min = _mm256_blendv_ps(min, zero, _mm256_cmp_ps(min, zero, _CMP_GT_OQ));
  const __m256 flat = _mm256_cmp_ps(max, min, _CMP_EQ_OQ);  // all values equal: levels 0

  __m256 iscale = _mm256_div_ps(levels, _mm256_sub_ps(max, min));
  __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.0f), iscale);
  __m256 best_error = zero;
  __m256 q[kGroupSize];
  for (int i = 0; i < kGroupSize; ++i) {
    q[i] = level(_mm256_mul_ps(iscale, _mm256_sub_ps(xt[i], min)), zero, levels);
    __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale, q[i]), min), xt[i]);
    diff = _mm256_mul_ps(diff, diff);
    best_error = _mm256_add_ps(best_error, _mm256_mul_ps(w[i], diff));
  }
  __m256 trial[kGroupSize];
  for (int step = 0; step <= search.steps; ++step) {
    const float numerator =
        search.rmin + 0.1f * static_cast<float>(step) + static_cast<float>(search.levels);
    // GGML's search moves its grid's origin to each better fit's offset: max - min anew.
    iscale = _mm256_div_ps(_mm256_set1_ps(numerator), _mm256_sub_ps(max, min));
    __m256 sum_l = zero, sum_l2 = zero, sum_xl = zero;
    for (int i = 0; i < kGroupSize; ++i) {
      trial[i] = level(_mm256_mul_ps(iscale, _mm256_sub_ps(xt[i], min)), zero, levels);
      const __m256 wl = _mm256_mul_ps(w[i], trial[i]);
      sum_l = _mm256_add_ps(sum_l, wl);
      sum_l2 = _mm256_add_ps(sum_l2, _mm256_mul_ps(wl, trial[i]));
      sum_xl = _mm256_add_ps(sum_xl, _mm256_mul_ps(wl, xt[i]));
    }
    const __m256 det = _mm256_sub_ps(_mm256_mul_ps(sum_w, sum_l2), _mm256_mul_ps(sum_l, sum_l));
    const __m256 solvable = _mm256_cmp_ps(det, zero, _CMP_GT_OQ);
    if (_mm256_movemask_ps(solvable) == 0) continue;
    __m256 this_scale = _mm256_div_ps(
        _mm256_sub_ps(_mm256_mul_ps(sum_w, sum_xl), _mm256_mul_ps(sum_x, sum_l)), det);
    __m256 this_min = _mm256_div_ps(
        _mm256_sub_ps(_mm256_mul_ps(sum_l2, sum_x), _mm256_mul_ps(sum_l, sum_xl)), det);
    const __m256 positive = _mm256_cmp_ps(this_min, zero, _CMP_GT_OQ);
    this_min = _mm256_blendv_ps(this_min, zero, positive);
    this_scale = _mm256_blendv_ps(this_scale, _mm256_div_ps(sum_xl, sum_l2), positive);
    __m256 error = zero;
    for (int i = 0; i < kGroupSize; ++i) {
      __m256 diff =
          _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(this_scale, trial[i]), this_min), xt[i]);
      diff = _mm256_mul_ps(diff, diff);
      error = _mm256_add_ps(error, _mm256_mul_ps(w[i], diff));
    }
    const __m256 better = _mm256_andnot_ps(
        flat, _mm256_and_ps(solvable, _mm256_cmp_ps(error, best_error, _CMP_LT_OQ)));
    if (_mm256_movemask_ps(better) == 0) continue;
    for (int i = 0; i < kGroupSize; ++i) q[i] = _mm256_blendv_ps(q[i], trial[i], better);
    best_error = _mm256_blendv_ps(best_error, error, better);
    scale = _mm256_blendv_ps(scale, this_scale, better);
    min = _mm256_blendv_ps(min, this_min, better);
  }
  // Flat groups: levels 0, scale 0, offset -min (min already clamped to <= 0).
  for (int i = 0; i < kGroupSize; ++i) q[i] = _mm256_blendv_ps(q[i], zero, flat);
  scale = _mm256_blendv_ps(scale, zero, flat);
  _mm256_storeu_ps(fit.scales, scale);
  _mm256_storeu_ps(fit.offsets, _mm256_sub_ps(zero, min));
  store_levels(q, kGroupSize, kGroupSize, 0, fit.q);
}

void fit_symmetric_groups_avx2(const float* x, SymmetricFit& fit) {
  constexpr int kLevels = 32;
  const __m256i offsets = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 lo = _mm256_set1_ps(-kLevels);
  const __m256 hi = _mm256_set1_ps(kLevels - 1);
  for (int half = 0; half < kSubGroups / kLanes; ++half) {
    const float* base = x + half * kLanes * kSubGroupSize;
    __m256 xt[kSubGroupSize];
    __m256 amax = zero, max = zero;
    for (int i = 0; i < kSubGroupSize; ++i) {
      xt[i] = _mm256_i32gather_ps(base + i, offsets, 4);
      const __m256 ax = abs_ps(xt[i]);
      const __m256 larger = _mm256_cmp_ps(ax, amax, _CMP_GT_OQ);
      amax = _mm256_blendv_ps(amax, ax, larger);
      max = _mm256_blendv_ps(max, xt[i], larger);
    }
    const __m256 all_zero = _mm256_cmp_ps(amax, _mm256_set1_ps(1e-15f), _CMP_LT_OQ);
    // Levels (as clamp(round(iscale x)), not yet biased) and the x^2-weighted sums of the fit.
    __m256 sum_lx, sum_l2;
    const auto fit_at = [&](__m256 iscale, __m256* out) {
      sum_lx = sum_l2 = zero;
      for (int i = 0; i < kSubGroupSize; ++i) {
        out[i] = level(_mm256_mul_ps(iscale, xt[i]), lo, hi);
        const __m256 w = _mm256_mul_ps(xt[i], xt[i]);
        sum_lx = _mm256_add_ps(sum_lx, _mm256_mul_ps(_mm256_mul_ps(w, xt[i]), out[i]));
        sum_l2 = _mm256_add_ps(sum_l2, _mm256_mul_ps(_mm256_mul_ps(w, out[i]), out[i]));
      }
    };
    __m256 q[kSubGroupSize], trial[kSubGroupSize];
    fit_at(_mm256_div_ps(_mm256_set1_ps(-kLevels), max), q);
    __m256 scale = _mm256_blendv_ps(_mm256_div_ps(sum_lx, sum_l2), zero,
                                    _mm256_cmp_ps(sum_l2, zero, _CMP_EQ_OQ));
    __m256 best = _mm256_mul_ps(scale, sum_lx);
    for (int step = -9; step <= 9; ++step) {
      if (step == 0) continue;
      const float numerator = -(static_cast<float>(kLevels) + 0.1f * static_cast<float>(step));
      fit_at(_mm256_div_ps(_mm256_set1_ps(numerator), max), trial);
      const __m256 better = _mm256_and_ps(
          _mm256_cmp_ps(sum_l2, zero, _CMP_GT_OQ),
          _mm256_cmp_ps(_mm256_mul_ps(sum_lx, sum_lx), _mm256_mul_ps(best, sum_l2), _CMP_GT_OQ));
      if (_mm256_movemask_ps(better) == 0) continue;
      for (int i = 0; i < kSubGroupSize; ++i) q[i] = _mm256_blendv_ps(q[i], trial[i], better);
      scale = _mm256_blendv_ps(scale, _mm256_div_ps(sum_lx, sum_l2), better);
      best = _mm256_blendv_ps(best, _mm256_mul_ps(scale, sum_lx), better);
    }
    // All-zero sub-groups: levels 0 (stored as 0, not 0 + 32) and scale 0.
    for (int i = 0; i < kSubGroupSize; ++i) q[i] = _mm256_blendv_ps(q[i], lo, all_zero);
    _mm256_storeu_ps(fit.scales + half * kLanes, _mm256_blendv_ps(scale, zero, all_zero));
    store_levels(q, kSubGroupSize, kSubGroupSize, kLevels, fit.q + half * kLanes * kSubGroupSize);
  }
}

}  // namespace lm::kernels::kquant

#else  // no AVX2: the scalar searches run

namespace lm::kernels::kquant {
bool fit_groups_avx2_built() { return false; }
void fit_affine_groups_avx2(const float*, const AffineSearch&, AffineFit&) {
  LM_CHECK_MSG(false, "built without AVX2");
}
void fit_symmetric_groups_avx2(const float*, SymmetricFit&) {
  LM_CHECK_MSG(false, "built without AVX2");
}
}  // namespace lm::kernels::kquant

#endif
