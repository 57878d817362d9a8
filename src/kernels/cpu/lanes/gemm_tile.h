// The fp32 GEMM tile (IsaKernels::gemm_tile) written once against the lane_math.h policies:
// register tiles of x-rows by w-rows, each accumulator k's lanes of one (x-row, w-row) pair,
// summed horizontally at the end. The scalar table keeps one dot per output as the reference.
#pragma once

#include <cstdint>

#include "kernels/cpu/lane_math.h"

namespace lm::kernels::lanes {
namespace {

// Policies with masked loads (Zmm) finish k's tail with one more masked step in the lanes; the
// others add the tail's products one at a time after the horizontal sum.
template <typename V>
concept MaskedLoads = requires(typename V::Mask m, const float* p) {
  V::load_masked(m, p);
};

// W-rows per register tile (x-rows: 4). 4 x 2 keeps 8 accumulators, 2 w and 1 x within 16
// registers; with 32, 4 x 4 keeps 16 accumulators in flight (enough to hide FMA latency on two
// ports) and needs 8 loads per 16 FMAs, half the 4 x 2 tile's bytes per FMA.
template <typename V>
inline constexpr int kGemmTileColumns = V::kRegisters >= 32 ? 4 : 2;

// MR x-rows against NR w-rows over all of k.
template <typename V, int MR, int NR>
void gemm_micro(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t k, float* y,
                int64_t ldy) {
  typename V::Reg acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
  }
  int64_t p = 0;
  for (; p + V::kLanes <= k; p += V::kLanes) {
    typename V::Reg wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) wv[j] = V::load(w + j * ldw + p);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const auto xv = V::load(x + i * ldx + p);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = V::fmadd(xv, wv[j], acc[i][j]);
    }
  }
  if constexpr (MaskedLoads<V>) {
    if (p < k) {
      const auto mask = V::first_lanes(k - p);
      typename V::Reg wv[NR];
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) wv[j] = V::load_masked(mask, w + j * ldw + p);
#pragma GCC unroll 4
      for (int i = 0; i < MR; ++i) {
        const auto xv = V::load_masked(mask, x + i * ldx + p);
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) acc[i][j] = V::fmadd(xv, wv[j], acc[i][j]);
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) y[i * ldy + j] = V::hsum(acc[i][j]);
    }
  } else {
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        float sum = V::hsum(acc[i][j]);
        for (int64_t t = p; t < k; ++t) sum += x[i * ldx + t] * w[j * ldw + t];
        y[i * ldy + j] = sum;
      }
    }
  }
}

// MR x-rows against all n w-rows: full tiles, then one w-row at a time.
template <typename V, int MR>
void gemm_rows(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t n, int64_t k,
               float* y, int64_t ldy) {
  constexpr int NR = kGemmTileColumns<V>;
  int64_t j = 0;
  for (; j + NR <= n; j += NR) gemm_micro<V, MR, NR>(x, ldx, w + j * ldw, ldw, k, y + j, ldy);
  for (; j < n; ++j) gemm_micro<V, MR, 1>(x, ldx, w + j * ldw, ldw, k, y + j, ldy);
}

// y[i * ldy + j] = dot(x + i * ldx, w + j * ldw) over k, for i < m, j < n.
template <typename V>
void gemm_tile(const float* x, int64_t ldx, int64_t m, const float* w, int64_t ldw, int64_t n,
               int64_t k, float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) gemm_rows<V, 4>(x + i * ldx, ldx, w, ldw, n, k, y + i * ldy, ldy);
  for (; i < m; ++i) gemm_rows<V, 1>(x + i * ldx, ldx, w, ldw, n, k, y + i * ldy, ldy);
}

}  // namespace
}  // namespace lm::kernels::lanes
