// The fp32 panel GEMM (IsaKernels::gemm_panel) written once against the lane_math.h policies:
// x-rows against one or two panels of kPanelWidth weight rows stored k-major, one register of
// lanes per panel row.
// Only a policy as wide as the panel, with masked stores, runs it; other tables use gemm_tile.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/lane_math.h"

namespace lm::kernels::lanes {
namespace {

template <typename V>
concept PanelLanes = V::kLanes ==
                     kPanelWidth&& requires(float* p, typename V::Mask m, typename V::Reg r) {
  V::store_masked(p, m, r);
};

// MR rows of x against the panel: one panel load and MR broadcast FMAs per step, MR independent
// accumulators (12 hide the FMA latency), no horizontal sums.
template <typename V, int MR>
requires PanelLanes<V>
void panel_micro(const float* x, int64_t ldx, const float* panel, int64_t k, float* y, int64_t ldy,
                 typename V::Mask columns) {
  typename V::Reg acc[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) acc[i] = V::zero();
  for (int64_t p = 0; p < k; ++p) {
    const auto w = V::load(panel + p * kPanelWidth);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) acc[i] = V::fmadd(V::set1(x[i * ldx + p]), w, acc[i]);
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) V::store_masked(y + i * ldy, columns, acc[i]);
}

// MR rows of x against two panels side by side (32 columns, the second's first `columns` stored):
// each x value loaded feeds two FMAs, 2 x MR accumulators (14 rows: 28, and 2 weight registers).
template <typename V, int MR>
requires PanelLanes<V>
void panel_pair_micro(const float* x, int64_t ldx, const float* panels, int64_t k, float* y,
                      int64_t ldy, typename V::Mask columns) {
  const float* second = panels + k * kPanelWidth;
  typename V::Reg acc[MR][2];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = V::zero();
  for (int64_t p = 0; p < k; ++p) {
    const auto w0 = V::load(panels + p * kPanelWidth);
    const auto w1 = V::load(second + p * kPanelWidth);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const auto xv = V::set1(x[i * ldx + p]);
      acc[i][0] = V::fmadd(xv, w0, acc[i][0]);
      acc[i][1] = V::fmadd(xv, w1, acc[i][1]);
    }
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    V::store(y + i * ldy, acc[i][0]);
    V::store_masked(y + i * ldy + kPanelWidth, columns, acc[i][1]);
  }
}

// y[i * ldy + c] = dot(x + i * ldx, column c of the panels) for i < m, c < nc (<= 2 x
// kPanelWidth; columns from kPanelWidth on are the second panel's, k * kPanelWidth values on).
template <typename V>
requires PanelLanes<V>
void gemm_panel(const float* x, int64_t ldx, int64_t m, const float* panels, int64_t nc, int64_t k,
                float* y, int64_t ldy) {
  int64_t i = 0;
  if (nc > kPanelWidth) {
    const auto columns = V::first_lanes(nc - kPanelWidth);
    for (; i + 14 <= m; i += 14)
      panel_pair_micro<V, 14>(x + i * ldx, ldx, panels, k, y + i * ldy, ldy, columns);
    for (; i + 4 <= m; i += 4)
      panel_pair_micro<V, 4>(x + i * ldx, ldx, panels, k, y + i * ldy, ldy, columns);
    for (; i < m; ++i)
      panel_pair_micro<V, 1>(x + i * ldx, ldx, panels, k, y + i * ldy, ldy, columns);
    return;
  }
  const auto columns = V::first_lanes(nc);
  for (; i + 12 <= m; i += 12)
    panel_micro<V, 12>(x + i * ldx, ldx, panels, k, y + i * ldy, ldy, columns);
  for (; i + 4 <= m; i += 4)
    panel_micro<V, 4>(x + i * ldx, ldx, panels, k, y + i * ldy, ldy, columns);
  for (; i < m; ++i) panel_micro<V, 1>(x + i * ldx, ldx, panels, k, y + i * ldy, ldy, columns);
}

}  // namespace
}  // namespace lm::kernels::lanes
