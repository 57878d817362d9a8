// AVX-512F inner loops (built with -mavx512f plus the AVX2 flags; used only after cpuid says so).
// Only the GEMM tile, the attention rows and the elementwise exps are wider: prefill and batched
// decode spend most of their time there, while the streaming kernels (dot_row, dequantize) are
// bound by memory and keep their AVX2 versions.
// NOTE: like kernels_avx2.cc, this file must not instantiate inline functions or templates with
// external linkage, or the linker could keep the AVX-512 copy for the whole program.
#include "kernels/cpu/isa.h"

#if defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

// GCC 12's AVX-512 intrinsics initialise their "undefined" vectors from themselves (GCC PR
// 105593), which -Wuninitialized reports at every use; the warning is about the header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/attention_rows.h"

namespace lm::kernels {
namespace {

float hsum(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm512_castps512_ps256(_mm512_shuffle_f32x4(v, v, 0xEE));
  const __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}

// MR x rows of x against NR rows of w over all of k, 16 lanes per step; the k tail is a masked
// load, so there is no scalar loop. 4 x 4 keeps 16 accumulators in flight (enough to hide FMA
// latency on two ports) and needs 8 loads per 16 FMAs, half the AVX2 4 x 2 tile's bytes per FMA.
template <int MR, int NR>
void gemm_micro(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t k, float* y,
                int64_t ldy) {
  __m512 acc[MR][NR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    __m512 wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_loadu_ps(w + j * ldw + p);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_loadu_ps(x + i * ldx + p);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  if (p < k) {
    const auto mask = static_cast<__mmask16>((1u << (k - p)) - 1u);
    __m512 wv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_ps(mask, w + j * ldw + p);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * ldx + p);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = hsum(acc[i][j]);
  }
}

template <int MR>
void gemm_rows(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t n, int64_t k,
               float* y, int64_t ldy) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) gemm_micro<MR, 4>(x, ldx, w + j * ldw, ldw, k, y + j, ldy);
  for (; j < n; ++j) gemm_micro<MR, 1>(x, ldx, w + j * ldw, ldw, k, y + j, ldy);
}

void gemm_tile(const float* x, int64_t ldx, int64_t m, const float* w, int64_t ldw, int64_t n,
               int64_t k, float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) gemm_rows<4>(x + i * ldx, ldx, w, ldw, n, k, y + i * ldy, ldy);
  for (; i < m; ++i) gemm_rows<1>(x + i * ldx, ldx, w, ldw, n, k, y + i * ldy, ldy);
}

// MR rows of x against a k-major panel of kPanelWidth columns: one panel load and MR broadcast
// FMAs per step, MR independent accumulators (12 hide the FMA latency), no horizontal sums.
template <int MR>
void panel_micro(const float* x, int64_t ldx, const float* panel, int64_t k, float* y, int64_t ldy,
                 __mmask16 columns) {
  __m512 acc[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const __m512 w = _mm512_loadu_ps(panel + p * kPanelWidth);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(x[i * ldx + p]), w, acc[i]);
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(y + i * ldy, columns, acc[i]);
}

void gemm_panel(const float* x, int64_t ldx, int64_t m, const float* panel, int64_t nc, int64_t k,
                float* y, int64_t ldy) {
  const auto columns = static_cast<__mmask16>((1u << nc) - 1u);
  int64_t i = 0;
  for (; i + 12 <= m; i += 12)
    panel_micro<12>(x + i * ldx, ldx, panel, k, y + i * ldy, ldy, columns);
  for (; i + 4 <= m; i += 4) panel_micro<4>(x + i * ldx, ldx, panel, k, y + i * ldy, ldy, columns);
  for (; i < m; ++i) panel_micro<1>(x + i * ldx, ldx, panel, k, y + i * ldy, ldy, columns);
}

void attend_rows(const float* const* q_rows, float* const* out_rows, const int64_t* num_positions,
                 int64_t num_rows, const float* k, const float* v, const int64_t* offsets,
                 int64_t head_dim, float scale, float* scratch) {
  attention_rows::attend_any<lanes::Zmm>(q_rows, out_rows, num_positions, num_rows, k, v, offsets,
                                         head_dim, scale, scratch);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  lanes::silu_mul<lanes::Zmm>(gate, up, out, n);
}

double sum_exp(const float* x, int64_t n, float shift) {
  return lanes::sum_exp<lanes::Zmm>(x, n, shift);
}

}  // namespace

const IsaKernels& avx512_kernels() {
  static const IsaKernels kKernels = [] {
    IsaKernels kernels = avx2_kernels();
    kernels.gemm_tile = gemm_tile;
    kernels.gemm_panel = gemm_panel;
    kernels.silu_mul = silu_mul;
    kernels.sum_exp = sum_exp;
    kernels.attend_rows = attend_rows;
    return kernels;
  }();
  return kKernels;
}

}  // namespace lm::kernels

#pragma GCC diagnostic pop

#else  // No AVX-512 in this build: isa_supported(kAvx512) is false on such targets, so never used.

namespace lm::kernels {
const IsaKernels& avx512_kernels() { return avx2_kernels(); }
}  // namespace lm::kernels

#endif
