// The fp32 panel GEMM (IsaKernels::gemm_panel) written once against the lane_math.h policies:
// x-rows against kPanelWidth weight rows stored k-major, one register of lanes per panel row.
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

// y[i * ldy + c] = dot(x + i * ldx, column c of panel) for i < m, c < nc.
template <typename V>
requires PanelLanes<V>
void gemm_panel(const float* x, int64_t ldx, int64_t m, const float* panel, int64_t nc, int64_t k,
                float* y, int64_t ldy) {
  const auto columns = V::first_lanes(nc);
  int64_t i = 0;
  for (; i + 12 <= m; i += 12)
    panel_micro<V, 12>(x + i * ldx, ldx, panel, k, y + i * ldy, ldy, columns);
  for (; i + 4 <= m; i += 4)
    panel_micro<V, 4>(x + i * ldx, ldx, panel, k, y + i * ldy, ldy, columns);
  for (; i < m; ++i) panel_micro<V, 1>(x + i * ldx, ldx, panel, k, y + i * ldy, ldy, columns);
}

}  // namespace
}  // namespace lm::kernels::lanes
