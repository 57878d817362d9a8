// AVX512_BF16's GEMM over BF16 pair panels (bf16_pairs.h): each step one 512-bit load of a
// panel's pair q (16 rows x 2 values), one broadcast of an activation row's pair q and one
// vdpbf16ps per (row, panel) tile cell: 32 multiply-adds an instruction where an fp32 FMA does 16,
// and the weights read as stored, with no conversion to fp32 panels first.
// GCC 12's AVX-512 intrinsics initialise their "undefined" vectors from themselves (GCC PR
// 105593), which -Wuninitialized reports at every use; the warning is about the header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "base/check.h"
#include "kernels/cpu/bf16_pairs.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/panels16.h"

namespace lm::kernels {

#if defined(__AVX512BF16__)

namespace {

constexpr int64_t kStepHalves = 2 * kPanel16Rows;
// Calls of up to kStreamRows rows (decode GEMVs, whose weights stream from DRAM once; also the
// last few rows of a prefill block) go one panel at a time, so one stream, prefetched as the
// 16-bit panels' dot does: two panels side by side ran 3-5% slower on SmolLM2 BF16 decode.
constexpr int64_t kStreamRows = 8;

// MR activation rows against NP panels over pairs [q0, q1): MR x NP accumulators, each one lane
// chain per output as bf16_pair_gemm_scalar runs it.
template <int MR, int NP, bool kStream = false>
void gemm_micro(const uint32_t* x, int64_t ldx, const uint16_t* w, int64_t panel_halves, int64_t q0,
                int64_t q1, float* y, int64_t ldy, bool accumulate) {
  __m512 acc[MR][NP];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j)
      acc[i][j] =
          accumulate ? _mm512_loadu_ps(y + i * ldy + j * kPanel16Rows) : _mm512_setzero_ps();
  }
  for (int64_t q = q0; q < q1; ++q) {
    if constexpr (kStream)
      _mm_prefetch(reinterpret_cast<const char*>(w + q * kStepHalves) + kPanelStreamPrefetchBytes,
                   _MM_HINT_T0);
    __m512bh wv[NP];
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j)
      wv[j] =
          reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + j * panel_halves + q * kStepHalves));
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      const auto xv =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(x[i * ldx + q])));
#pragma GCC unroll 2
      for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j) _mm512_storeu_ps(y + i * ldy + j * kPanel16Rows, acc[i][j]);
  }
}

// All m rows against NP panels: tiles of 14 rows (28 accumulators and 2 weight registers of the
// 32), then 4, 2, 1.
template <int NP, bool kStream = false>
void gemm_rows(const uint32_t* x, int64_t ldx, int64_t m, const uint16_t* w, int64_t panel_halves,
               int64_t q0, int64_t q1, float* y, int64_t ldy, bool accumulate) {
  int64_t i = 0;
  for (; i + 14 <= m; i += 14) {
    gemm_micro<14, NP, kStream>(x + i * ldx, ldx, w, panel_halves, q0, q1, y + i * ldy, ldy,
                                accumulate);
  }
  for (; i + 4 <= m; i += 4) {
    gemm_micro<4, NP, kStream>(x + i * ldx, ldx, w, panel_halves, q0, q1, y + i * ldy, ldy,
                               accumulate);
  }
  for (; i + 2 <= m; i += 2) {
    gemm_micro<2, NP, kStream>(x + i * ldx, ldx, w, panel_halves, q0, q1, y + i * ldy, ldy,
                               accumulate);
  }
  for (; i < m; ++i) {
    gemm_micro<1, NP, kStream>(x + i * ldx, ldx, w, panel_halves, q0, q1, y + i * ldy, ldy,
                               accumulate);
  }
}

void bf16_pair_gemm_avx512(const uint32_t* x, int64_t ldx, int64_t m, const void* panels,
                           int64_t num_panels, int64_t k, int64_t q0, int64_t q1, float* y,
                           int64_t ldy, bool accumulate) {
  const auto* w = static_cast<const uint16_t*>(panels);
  const int64_t panel_halves = k * kPanel16Rows;
  if (m <= kStreamRows) {
    for (int64_t g = 0; g < num_panels; ++g) {
      gemm_rows<1, true>(x, ldx, m, w + g * panel_halves, panel_halves, q0, q1,
                         y + g * kPanel16Rows, ldy, accumulate);
    }
    return;
  }
  int64_t g = 0;
  for (; g + 2 <= num_panels; g += 2) {
    gemm_rows<2>(x, ldx, m, w + g * panel_halves, panel_halves, q0, q1, y + g * kPanel16Rows, ldy,
                 accumulate);
  }
  for (; g < num_panels; ++g) {
    gemm_rows<1>(x, ldx, m, w + g * panel_halves, panel_halves, q0, q1, y + g * kPanel16Rows, ldy,
                 accumulate);
  }
}

// bf16_pairs_of's integer rounding (fp32_to_bf16: + 0x7fff + the kept lowest bit, NaNs made
// quiet) on 16 lanes, the high halves narrowed in order: the pairs are the rounded values one
// after another. vcvtne2ps2bf16 would read fp32 subnormals as zero, where the reference rounds
// the largest of them up to bf16's smallest normal. The scalar loop it replaces took ~7% of
// SmolLM2 BF16's 512-token prefill, converting each product's rows (q, k and v each).
void bf16_pairs_of_avx512(const float* x, int64_t k, uint32_t* dst) {
  LM_CHECK(k % 2 == 0);
  auto* out = reinterpret_cast<uint16_t*>(dst);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m512i infinity = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  int64_t p = 0;
  const auto rounded = [&](__mmask16 lanes) {
    const __m512i u = _mm512_maskz_loadu_epi32(lanes, x + p);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    const __m512i up = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, magnitude), infinity);
    return _mm512_mask_or_epi32(up, nan, _mm512_srli_epi32(u, 16), quiet);
  };
  for (; p + 16 <= k; p += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + p),
                        _mm512_cvtepi32_epi16(rounded(static_cast<__mmask16>(0xffff))));
  }
  if (p < k) {
    const auto lanes = static_cast<__mmask16>((1u << (k - p)) - 1);
    _mm512_mask_cvtepi32_storeu_epi16(out + p, lanes, rounded(lanes));
  }
}

}  // namespace

void add_avx512_bf16_kernels(IsaKernels& kernels) {
  kernels.bf16_pair_gemm = bf16_pair_gemm_avx512;
  kernels.bf16_pairs_of = bf16_pairs_of_avx512;
}

#else  // No AVX512_BF16 in this build: isa_supported(kAvx512Bf16) is false on such targets.

void add_avx512_bf16_kernels(IsaKernels&) {}

#endif

}  // namespace lm::kernels

#pragma GCC diagnostic pop
