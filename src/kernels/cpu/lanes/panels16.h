// The 16-bit weight panel kernels (IsaKernels::panel16_dot, panel16_unpack, panel16_gemm,
// panel16_direct_gemm; the layout is panels16.h's) written once against the lane_math.h
// policies: kPanel16Rows weight rows per panel take kPanel16Rows / kLanes registers, and every
// output is one fp32 FMA chain over k in order, in its own lane, so any width, tile or batch
// gives the scalar reference's bits.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/lane_math.h"
#include "kernels/cpu/panels16.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels::lanes {
namespace {

// Registers per panel row.
template <typename V>
inline constexpr int kPanelRegs = static_cast<int>(kPanel16Rows) / V::kLanes;

template <typename V, RowFormat F>
typename V::Reg load_half(const uint16_t* p) {
  if constexpr (F == RowFormat::kF16) {
    return V::load_f16(p);
  } else {
    return V::load_bf16(p);
  }
}

// MR activation rows against NP panels side by side, straight from their 16-bit values. Few rows
// (decode) stream the weights from DRAM once, and one panel's stream (one FMA chain per output,
// prefetched kPanelStreamPrefetchBytes ahead) held a core to ~28 GB/s of F16 weights on this
// Zen 4; four panels side by side, left to the hardware prefetchers (software prefetches for four
// streams cost more than they bring), read ~37 GB/s on one core and ~69 on two (BF16's pair
// panels' rate; one panel: ~54).
template <typename V, RowFormat F, int MR, int NP>
void dot_micro(const uint16_t* w, int64_t k, const float* x, int64_t ldx, float* y, int64_t ldy) {
  constexpr int R = kPanelRegs<V>;
  constexpr int NR = NP * R;
  const int64_t panel_elems = k * kPanel16Rows;
  typename V::Reg acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
  }
  for (int64_t p = 0; p < k; ++p) {
    typename V::Reg wv[NR];
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) {
      const uint16_t* step = w + q * panel_elems + p * kPanel16Rows;
      if constexpr (NP == 1)
        _mm_prefetch(reinterpret_cast<const char*>(step) + kPanelStreamPrefetchBytes, _MM_HINT_T0);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) wv[q * R + r] = load_half<V, F>(step + r * V::kLanes);
    }
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const auto xv = V::set1(x[i * ldx + p]);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = V::fmadd(xv, wv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) V::store(y + i * ldy + j * V::kLanes, acc[i][j]);
  }
}

// Panels side by side for MR rows: kPanel16DecodePanels (4) for one row (8 ran slower than one),
// 2 for 2-3 rows (their accumulators, MR x NP x kPanelRegs, within AVX2's 16 registers), else 1.
template <int MR>
inline constexpr int kDotPanels = MR == 1   ? static_cast<int>(kPanel16DecodePanels)
                                  : MR <= 3 ? 2
                                            : 1;

// MR rows against panels [0, num_panels).
template <typename V, RowFormat F, int MR>
void dot_rows(const uint16_t* w, int64_t num_panels, int64_t k, const float* x, int64_t ldx,
              float* y, int64_t ldy) {
  constexpr int NP = kDotPanels<MR>;
  const int64_t panel_elems = k * kPanel16Rows;
  int64_t g = 0;
  if (k >= kPanel16SideBySideMinDepth) {
    for (; g + NP <= num_panels; g += NP)
      dot_micro<V, F, MR, NP>(w + g * panel_elems, k, x, ldx, y + g * kPanel16Rows, ldy);
  }
  for (; g < num_panels; ++g)
    dot_micro<V, F, MR, 1>(w + g * panel_elems, k, x, ldx, y + g * kPanel16Rows, ldy);
}

template <typename V, RowFormat F>
void panel16_dot_format(const uint16_t* w, int64_t num_panels, int64_t k, const float* x,
                        int64_t ldx, int64_t m, float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4)
    dot_rows<V, F, 4>(w, num_panels, k, x + i * ldx, ldx, y + i * ldy, ldy);
  for (; i + 2 <= m; i += 2)
    dot_rows<V, F, 2>(w, num_panels, k, x + i * ldx, ldx, y + i * ldy, ldy);
  for (; i < m; ++i) dot_rows<V, F, 1>(w, num_panels, k, x + i * ldx, ldx, y + i * ldy, ldy);
}

// y[i * ldy + 16 g + c] = sum over p of x[i * ldx + p] * panel g's (p, c), for few rows (decode).
template <typename V>
void panel16_dot(RowFormat format, const void* panels, int64_t num_panels, int64_t k,
                 const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy) {
  const auto* w = static_cast<const uint16_t*>(panels);
  if (format == RowFormat::kF16) {
    panel16_dot_format<V, RowFormat::kF16>(w, num_panels, k, x, ldx, m, y, ldy);
  } else {
    panel16_dot_format<V, RowFormat::kBF16>(w, num_panels, k, x, ldx, m, y, ldy);
  }
}

// dst[(p - p0) * 16 + c] = panel's (p, c) as fp32, for p in [p0, p1).
template <typename V>
void panel16_unpack(RowFormat format, const void* panel, int64_t p0, int64_t p1, float* dst) {
  const auto* src = static_cast<const uint16_t*>(panel) + p0 * kPanel16Rows;
  const int64_t count = (p1 - p0) * kPanel16Rows;
  if (format == RowFormat::kF16) {
    for (int64_t e = 0; e < count; e += V::kLanes) V::store(dst + e, V::load_f16(src + e));
  } else {
    for (int64_t e = 0; e < count; e += V::kLanes) V::store(dst + e, V::load_bf16(src + e));
  }
}

// Where a prefill tile reads its panels' values: fp32 panels unpacked ahead (panel16_unpack), or
// the 16-bit panels themselves, converted in registers at every step.
struct Fp32Panels {
  using Value = float;
  template <typename V>
  static typename V::Reg load(const float* p) {
    return V::load(p);
  }
};
template <RowFormat F>
struct HalfPanels {
  using Value = uint16_t;
  template <typename V>
  static typename V::Reg load(const uint16_t* p) {
    return load_half<V, F>(p);
  }
};

// MR rows against NP panels (one after another, k * 16 values each), continuing the chains in y
// when `accumulate`.
template <typename V, typename Panels, int MR, int NP>
void gemm_micro(const float* x, int64_t ldx, const typename Panels::Value* panels, int64_t k,
                float* y, int64_t ldy, bool accumulate,
                const typename Panels::Value* prefetch = nullptr) {
  constexpr int R = kPanelRegs<V>;
  constexpr int NR = NP * R;
  const int64_t panel_elems = k * kPanel16Rows;
  typename V::Reg acc[MR][NR];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j)
      acc[i][j] = accumulate ? V::load(y + i * ldy + j * V::kLanes) : V::zero();
  }
  for (int64_t p = 0; p < k; ++p) {
    if (prefetch != nullptr)
      _mm_prefetch(reinterpret_cast<const char*>(prefetch + p * kPanel16Rows * NP), _MM_HINT_T0);
    typename V::Reg wv[NR];
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) {
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        wv[q * R + r] =
            Panels::template load<V>(panels + q * panel_elems + p * kPanel16Rows + r * V::kLanes);
      }
    }
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const auto xv = V::set1(x[i * ldx + p]);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = V::fmadd(xv, wv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) V::store(y + i * ldy + j * V::kLanes, acc[i][j]);
  }
}

// Panels a prefill tile spans: two with 32 registers, so each x value loaded feeds two FMAs
// (14 rows x 2 panels: 28 accumulators, 2 weight registers; it ran ~1.5x the 12 x 1 tile's
// FLOP/s, which issued a load per FMA), one with 16.
template <typename V>
inline constexpr int kGemmPanels = V::kRegisters >= 32 ? 2 : 1;

// Rows per register tile: 14 x 2 panels of 16 lanes, else 12 accumulators (12 x 1 of 16 lanes,
// 6 x 2 of 8).
template <typename V, int NP>
inline constexpr int kGemmRows = NP == 2 ? 14 : 12 / kPanelRegs<V>;

// All m rows against NP panels: full tiles, then 4, 2 and 1 rows. Two rows left take one tile of
// 2, not two of 1, whose one chain per register waits on the FMA latency (4096 x 4096 F16, 2
// threads, GFLOP/s before vs after: avx2 8 rows 124 -> 174, avx512-bf16 16 rows 174 -> 194, 30
// rows 187 -> 197: a batch of 8 or 16 decoding sequences).
template <typename V, typename Panels, int NP>
void gemm_rows(const float* x, int64_t ldx, int64_t m, const typename Panels::Value* panels,
               int64_t k, float* y, int64_t ldy, bool accumulate,
               const typename Panels::Value* prefetch = nullptr) {
  constexpr int MR = kGemmRows<V, NP>;
  int64_t i = 0;
  for (; i + MR <= m; i += MR) {
    gemm_micro<V, Panels, MR, NP>(x + i * ldx, ldx, panels, k, y + i * ldy, ldy, accumulate,
                                  i == 0 ? prefetch : nullptr);
  }
  for (; i + 4 <= m; i += 4)
    gemm_micro<V, Panels, 4, NP>(x + i * ldx, ldx, panels, k, y + i * ldy, ldy, accumulate);
  for (; i + 2 <= m; i += 2)
    gemm_micro<V, Panels, 2, NP>(x + i * ldx, ldx, panels, k, y + i * ldy, ldy, accumulate);
  for (; i < m; ++i)
    gemm_micro<V, Panels, 1, NP>(x + i * ldx, ldx, panels, k, y + i * ldy, ldy, accumulate);
}

// Whether a prefill tile's first row block, straight from 16-bit panels, prefetches the next
// panels (one prefetch a step of 32 bytes, so each line twice) while the later row blocks find the
// current ones in cache: with 8 lanes the first block otherwise waits on DRAM (7B-shaped F16, 2
// threads, avx2, GFLOP/s without vs with: 64 rows 191-195 vs 215-220, 16 rows 132-140 vs 189-203,
// 128 rows 199-203 vs 200-213); the 16-lane tile (two panels, 14 rows) kept its pace without (64
// rows 198-208 vs 195-202).
template <typename V, typename Panels>
inline constexpr bool kPrefetchNextPanels =
    V::kLanes == 8 && std::is_same_v<typename Panels::Value, uint16_t>;

// All m rows against num_panels panels, NP at a time.
template <typename V, typename Panels>
void gemm_panels(const float* x, int64_t ldx, int64_t m, const typename Panels::Value* panels,
                 int64_t num_panels, int64_t k, float* y, int64_t ldy, bool accumulate) {
  constexpr int NP = kGemmPanels<V>;
  const int64_t panel_elems = k * kPanel16Rows;
  int64_t g = 0;
  for (; g + NP <= num_panels; g += NP) {
    const auto* next = kPrefetchNextPanels<V, Panels> && g + 2 * NP <= num_panels
                           ? panels + (g + NP) * panel_elems
                           : nullptr;
    gemm_rows<V, Panels, NP>(x, ldx, m, panels + g * panel_elems, k, y + g * kPanel16Rows, ldy,
                             accumulate, next);
  }
  for (; g < num_panels; ++g) {
    gemm_rows<V, Panels, 1>(x, ldx, m, panels + g * panel_elems, k, y + g * kPanel16Rows, ldy,
                            accumulate);
  }
}

// y[i * ldy + 16 g + c] (+)= sum over p < k of x[i * ldx + p] * panels[(g * k + p) * 16 + c], for
// i < m, g < num_panels, c < 16.
template <typename V>
void panel16_gemm(const float* x, int64_t ldx, int64_t m, const float* panels, int64_t num_panels,
                  int64_t k, float* y, int64_t ldy, bool accumulate) {
  gemm_panels<V, Fp32Panels>(x, ldx, m, panels, num_panels, k, y, ldy, accumulate);
}

// Prefill rows up to which panel16_direct_gemm beats unpacking (IsaKernels::
// panel16_direct_max_rows; 4096 x 4096, 11008 x 4096 and 4096 x 11008 F16 Linears, 2 threads,
// GFLOP/s direct vs unpacked): with 8 lanes at every row count (64 rows 199-205 vs 186-193, 512
// rows 214-224 vs 206-214), with 16 lanes for few rows only (64 rows 202-208 vs 190-194, 128 rows
// 204-210 vs 201-202, 256 even at ~210, 512 rows 208-211 vs 212-218: there the unpacked tile's
// fp32 panels serve enough rows to pay for their conversion).
template <typename V>
inline constexpr int64_t kPanel16DirectMaxRows = V::kLanes == 8 ? INT64_MAX : 128;

// panel16_dot's product in the prefill tiles, straight from the 16-bit values (over all of k).
template <typename V>
void panel16_direct_gemm(RowFormat format, const void* panels, int64_t num_panels, int64_t k,
                         const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy) {
  const auto* w = static_cast<const uint16_t*>(panels);
  if (format == RowFormat::kF16) {
    gemm_panels<V, HalfPanels<RowFormat::kF16>>(x, ldx, m, w, num_panels, k, y, ldy, false);
  } else {
    gemm_panels<V, HalfPanels<RowFormat::kBF16>>(x, ldx, m, w, num_panels, k, y, ldy, false);
  }
}

}  // namespace
}  // namespace lm::kernels::lanes
