// The FP8 panel kernels (IsaKernels::fp8_panel_dot, fp8_panel_unpack; the layout is
// panels_fp8.h's) written once against the lane_math.h policies: each register of kLanes rows
// converts its bytes exactly and multiplies them by its lane scales as fp8_panel_weight does, so
// the weights (and, with each output one FMA chain over k in order, the outputs) are the scalar
// reference's bits at every width.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/lane_math.h"
#include "kernels/cpu/lanes/panels16.h"
#include "kernels/cpu/panels_fp8.h"

namespace lm::kernels::lanes {
namespace {

// kLanes weights of a panel row: bytes at p times their lane scales.
template <typename V, bool kE5M2>
typename V::Reg fp8_weights(const uint8_t* p, typename V::Reg scale) {
  return V::mul(V::template load_fp8<kE5M2>(p), scale);
}

// f<kE5M2>() for the weight's format.
template <typename F>
void with_fp8_format(const Fp8Panels& w, const F& f) {
  if (w.format == Fp8Format::kE5M2) {
    f.template operator()<true>();
  } else {
    f.template operator()<false>();
  }
}

// MR activation rows against NP panels from g, straight from their bytes.
template <typename V, bool kE5M2, int MR, int NP>
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
          wv[q * R + r] = fp8_weights<V, kE5M2>(
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

// Panels an FP8 decode step runs side by side: two with 32 registers, one with 16. (The 16-bit
// panels' dot now reads one panel at a time, see panels16.h; FP8's has not been measured so.)
template <typename V>
inline constexpr int kFp8DotPanels = V::kRegisters >= 32 ? 2 : 1;

// MR rows against panels [g0, g0 + num_panels).
template <typename V, bool kE5M2, int MR>
void fp8_dot_rows(const Fp8Panels& w, int64_t g0, int64_t num_panels, int64_t k, const float* x,
                  int64_t ldx, float* y, int64_t ldy) {
  constexpr int NP = kFp8DotPanels<V>;
  int64_t g = 0;
  for (; g + NP <= num_panels; g += NP)
    fp8_dot_micro<V, kE5M2, MR, NP>(w, g0 + g, k, x, ldx, y + g * kPanel16Rows, ldy);
  for (; g < num_panels; ++g)
    fp8_dot_micro<V, kE5M2, MR, 1>(w, g0 + g, k, x, ldx, y + g * kPanel16Rows, ldy);
}

template <typename V>
void fp8_panel_dot(const Fp8Panels& w, int64_t g0, int64_t num_panels, int64_t k, const float* x,
                   int64_t ldx, int64_t m, float* y, int64_t ldy) {
  with_fp8_format(w, [&]<bool kE5M2>() {
    int64_t i = 0;
    for (; i + 4 <= m; i += 4)
      fp8_dot_rows<V, kE5M2, 4>(w, g0, num_panels, k, x + i * ldx, ldx, y + i * ldy, ldy);
    for (; i + 2 <= m; i += 2)
      fp8_dot_rows<V, kE5M2, 2>(w, g0, num_panels, k, x + i * ldx, ldx, y + i * ldy, ldy);
    for (; i < m; ++i)
      fp8_dot_rows<V, kE5M2, 1>(w, g0, num_panels, k, x + i * ldx, ldx, y + i * ldy, ldy);
  });
}

template <typename V, bool kE5M2>
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
        V::store(dst + (p - p0) * kPanel16Rows + r * V::kLanes,
                 fp8_weights<V, kE5M2>(values + p * kPanel16Rows + r * V::kLanes, scale[r]));
      }
    }
  }
}

// dst[(p - p0) * 16 + c] = panel g's weight (p, c), for p in [p0, p1).
template <typename V>
void fp8_panel_unpack(const Fp8Panels& w, int64_t g, int64_t k, int64_t p0, int64_t p1,
                      float* dst) {
  with_fp8_format(w, [&]<bool kE5M2>() { fp8_unpack_format<V, kE5M2>(w, g, k, p0, p1, dst); });
}

}  // namespace
}  // namespace lm::kernels::lanes
