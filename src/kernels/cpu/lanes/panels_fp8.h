// The FP8 panel kernels (IsaKernels::fp8_panel_dot, fp8_panel_unpack; the layout is
// panels_fp8.h's) written once against the lane_math.h policies: each register of kLanes rows
// converts its bytes exactly, multiplies by its lane scales and rounds as fp8_panel_weight does,
// so the weights (and, with each output one FMA chain over k in order, the outputs) are the scalar
// reference's bits at every width.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/cpu/lane_math.h"
#include "kernels/cpu/lanes/panels16.h"
#include "kernels/cpu/panels_fp8.h"

namespace lm::kernels::lanes {
namespace {

// The roundings after the scale, as one compile-time choice (the two steps with a no-op or a
// repeat dropped): the kernels' inner loops carry no branch for them.
enum class Rounding : uint8_t { kNone, kBF16, kF16, kBF16ThenF16, kF16ThenBF16 };

inline Rounding rounding_of(const Fp8Panels& w) {
  Round16 first = w.round_first, second = w.round_second;
  if (first == second || first == Round16::kNone) first = Round16::kNone;
  if (second == Round16::kNone) std::swap(first, second);
  if (first == Round16::kNone) {
    return second == Round16::kBF16  ? Rounding::kBF16
           : second == Round16::kF16 ? Rounding::kF16
                                     : Rounding::kNone;
  }
  return first == Round16::kBF16 ? Rounding::kBF16ThenF16 : Rounding::kF16ThenBF16;
}

// kLanes weights of a panel row: bytes at p, times their lane scales, rounded.
template <typename V, bool kE5M2, Rounding kRound>
typename V::Reg fp8_weights(const uint8_t* p, typename V::Reg scale) {
  const auto v = V::mul(V::template load_fp8<kE5M2>(p), scale);
  if constexpr (kRound == Rounding::kBF16) return V::round_bf16(v);
  if constexpr (kRound == Rounding::kF16) return V::round_f16(v);
  if constexpr (kRound == Rounding::kBF16ThenF16) return V::round_f16(V::round_bf16(v));
  if constexpr (kRound == Rounding::kF16ThenBF16) return V::round_bf16(V::round_f16(v));
  return v;
}

// f<kE5M2, kRound>() for the weight's format and rounding.
template <typename F>
void with_fp8_kind(const Fp8Panels& w, const F& f) {
  const auto by_rounding = [&]<bool kE5M2>() {
    switch (rounding_of(w)) {
      case Rounding::kNone:
        return f.template operator()<kE5M2, Rounding::kNone>();
      case Rounding::kBF16:
        return f.template operator()<kE5M2, Rounding::kBF16>();
      case Rounding::kF16:
        return f.template operator()<kE5M2, Rounding::kF16>();
      case Rounding::kBF16ThenF16:
        return f.template operator()<kE5M2, Rounding::kBF16ThenF16>();
      case Rounding::kF16ThenBF16:
        return f.template operator()<kE5M2, Rounding::kF16ThenBF16>();
    }
  };
  if (w.format == Fp8Format::kE5M2) {
    by_rounding.template operator()<true>();
  } else {
    by_rounding.template operator()<false>();
  }
}

// MR activation rows against NP panels from g, straight from their bytes.
template <typename V, bool kE5M2, Rounding kRound, int MR, int NP>
void fp8_dot_micro(const Fp8Panels& w, int64_t g, int64_t k, const float* x, int64_t ldx, float* y,
                   int64_t ldy) {
  constexpr int R = kPanelRegs<V>;
  constexpr int NR = NP * R;
  const int64_t panel_elems = k * kPanel16Rows;
  const uint8_t* values = w.values + g * panel_elems;
  typename V::Reg acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
  }
  for (int64_t b = 0; b < w.num_blocks; ++b) {
    typename V::Reg scale[NR];
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) {
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        scale[q * R + r] =
            V::load(w.lane_scales + ((g + q) * w.num_blocks + b) * kPanel16Rows + r * V::kLanes);
      }
    }
    const int64_t p_end = std::min(k, (b + 1) * w.block_cols);
    for (int64_t p = b * w.block_cols; p < p_end; ++p) {
      typename V::Reg wv[NR];
#pragma GCC unroll 4
      for (int q = 0; q < NP; ++q) {
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) {
          wv[q * R + r] = fp8_weights<V, kE5M2, kRound>(
              values + q * panel_elems + p * kPanel16Rows + r * V::kLanes, scale[q * R + r]);
        }
      }
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const auto xv = V::set1(x[i * ldx + p]);
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) acc[i][j] = V::fmadd(xv, wv[j], acc[i][j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) V::store(y + i * ldy + j * V::kLanes, acc[i][j]);
  }
}

// MR rows against panels [g0, g0 + num_panels).
template <typename V, bool kE5M2, Rounding kRound, int MR>
void fp8_dot_rows(const Fp8Panels& w, int64_t g0, int64_t num_panels, int64_t k, const float* x,
                  int64_t ldx, float* y, int64_t ldy) {
  constexpr int NP = kDotPanels<V>;
  int64_t g = 0;
  for (; g + NP <= num_panels; g += NP)
    fp8_dot_micro<V, kE5M2, kRound, MR, NP>(w, g0 + g, k, x, ldx, y + g * kPanel16Rows, ldy);
  for (; g < num_panels; ++g)
    fp8_dot_micro<V, kE5M2, kRound, MR, 1>(w, g0 + g, k, x, ldx, y + g * kPanel16Rows, ldy);
}

template <typename V>
void fp8_panel_dot(const Fp8Panels& w, int64_t g0, int64_t num_panels, int64_t k, const float* x,
                   int64_t ldx, int64_t m, float* y, int64_t ldy) {
  with_fp8_kind(w, [&]<bool kE5M2, Rounding kRound>() {
    int64_t i = 0;
    for (; i + 4 <= m; i += 4)
      fp8_dot_rows<V, kE5M2, kRound, 4>(w, g0, num_panels, k, x + i * ldx, ldx, y + i * ldy, ldy);
    for (; i + 2 <= m; i += 2)
      fp8_dot_rows<V, kE5M2, kRound, 2>(w, g0, num_panels, k, x + i * ldx, ldx, y + i * ldy, ldy);
    for (; i < m; ++i)
      fp8_dot_rows<V, kE5M2, kRound, 1>(w, g0, num_panels, k, x + i * ldx, ldx, y + i * ldy, ldy);
  });
}

template <typename V, bool kE5M2, Rounding kRound>
void fp8_unpack_format(const Fp8Panels& w, int64_t g, int64_t k, int64_t p0, int64_t p1,
                       float* dst) {
  constexpr int R = kPanelRegs<V>;
  const uint8_t* values = w.values + g * k * kPanel16Rows;
  for (int64_t p = p0; p < p1;) {
    const int64_t b = p / w.block_cols;
    const int64_t p_end = std::min(p1, (b + 1) * w.block_cols);
    typename V::Reg scale[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r)
      scale[r] = V::load(w.lane_scales + (g * w.num_blocks + b) * kPanel16Rows + r * V::kLanes);
    for (; p < p_end; ++p) {
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        V::store(
            dst + (p - p0) * kPanel16Rows + r * V::kLanes,
            fp8_weights<V, kE5M2, kRound>(values + p * kPanel16Rows + r * V::kLanes, scale[r]));
      }
    }
  }
}

// dst[(p - p0) * 16 + c] = panel g's weight (p, c), for p in [p0, p1).
template <typename V>
void fp8_panel_unpack(const Fp8Panels& w, int64_t g, int64_t k, int64_t p0, int64_t p1,
                      float* dst) {
  with_fp8_kind(w, [&]<bool kE5M2, Rounding kRound>() {
    fp8_unpack_format<V, kE5M2, kRound>(w, g, k, p0, p1, dst);
  });
}

}  // namespace
}  // namespace lm::kernels::lanes
