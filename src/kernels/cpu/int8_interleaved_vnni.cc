// The interleaved int8 GEMM on AVX-512 VNNI (see int8_interleaved.h). Built with
// -mavx512f/bw/vl/vnni and used only when cpuid reports them.
//
// A 512-bit weight word holds 8 bytes of each of 8 rows: int32 lane 2r covers row r's elements
// 8c..8c+3 and lane 2r + 1 its elements 8c+4..8c+7 (c: the word's place in the block), so the
// activations of word c are 8 bytes broadcast to every row. Weights become unsigned bytes (Q8_0:
// xor 0x80, i.e. +128; nibbles already are; Q5 adds 16 where the fifth bit is set; IQ4 nibbles
// become their level + 128 by vpshufb) and the zero point z (128 for Q8_0 and IQ4, 8 for Q4_0, 16
// for Q5_0, 32 for Q6_K, 4 for Q3_K) is taken back through the int32 accumulator's start, -z *
// (sum of the lane's activations), which the prepared activations carry for both lane halves.
// Per (8 weight rows, activation row, block of 32):
//   dot = vpdpbusd x 4 (words 0-3) from -z * half sums          exact in int32
//   acc += (row scales per lane * activation scale) * float(dot)
//   acc += row minimums per lane * (activation scale * half sum)  (Q4_1, Q5_1, Q4_K, Q5_K)
// (Q6_K, Q3_K and Q2_K, with a scale and Q2_K a minimum per 16 elements, sum words 0-1 and 2-3
// separately.)
// and at the end row r's result is lane 2r + lane 2r + 1.
// NOTE: as in kernels_avx2.cc, nothing here may instantiate inline functions or templates with
// external linkage: only internal-linkage helpers and intrinsics.
#include "kernels/cpu/int8_interleaved.h"

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__F16C__)

// GCC 12's AVX-512 intrinsics initialise their "undefined" vectors from themselves (GCC PR
// 105593), which -Wuninitialized reports at every use; the warning is about the header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/int8_interleaved_prepared.h"
#include "kernels/cpu/interleaved_rows.h"
#include "kernels/cpu/kquant_blocks.h"
#include "kernels/cpu/lowbit_blocks.h"
#include "kernels/cpu/q4_z128_blocks.h"
#include "kernels/cpu/row_count_dispatch.h"

namespace lm::kernels {
namespace {

constexpr int64_t kRows = kInterleavedRows;

using PreparedBlock = Int8InterleavedBlock;

// No software prefetch: a group's bytes are read strictly forwards (the layout is in reading
// order), which the hardware prefetcher follows. Decode GEMVs of 7B shapes streamed from DRAM,
// alternating in one process against the kernel that requested each block's lines 2 KiB (L1)
// and 16 KiB (L2) ahead: 1.16-1.24x at 1 thread for Q8_0, Q4_0, Q4_1, Q4_K and Q6_K (1.16x for
// Q4_0, whose code only lost the prefetch), 1.04-1.23x at 2 threads.

static inline __m512i broadcast8(const void* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  return _mm512_set1_epi64(v);
}

static inline __m512i load512(const uint8_t* p) {
  return _mm512_loadu_si512(reinterpret_cast<const __m512i*>(p));
}

static inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 8 fp16 values (one per row) as fp32.
static inline __m256 f16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Lanes 2r and 2r + 1 take value r of v (lanes 0-7), or with `high` value 8 + r.
static inline __m512 row_pairs(__m512 v, bool high = false) {
  const __m512i idx = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  return _mm512_permutexvar_ps(high ? _mm512_add_epi32(idx, _mm512_set1_epi32(8)) : idx, v);
}

static inline __m512 concat(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
}

// One block of 32 for 8 weight rows (words u[0..4), the rows' scales dw and minimums mw per
// lane) against RX activation rows: x[i * x_stride] is row i's prepared block.
template <int RX, int kZeroShift, bool kMin>
static inline void accumulate(const __m512i (&u)[4], __m512 dw, __m512 mw, const PreparedBlock* x,
                              int64_t x_stride, __m512 (&acc)[RX]) {
#pragma GCC unroll 8
  for (int i = 0; i < RX; ++i) {
    const PreparedBlock& p = x[i * x_stride];
    __m512i dot = kZeroShift > 0 ? _mm512_slli_epi32(broadcast8(p.neg_sum), kZeroShift)
                                 : _mm512_setzero_si512();
    dot = _mm512_dpbusd_epi32(dot, u[0], broadcast8(p.q));
    dot = _mm512_dpbusd_epi32(dot, u[1], broadcast8(p.q + 8));
    dot = _mm512_dpbusd_epi32(dot, u[2], broadcast8(p.q + 16));
    dot = _mm512_dpbusd_epi32(dot, u[3], broadcast8(p.q + 24));
    acc[i] =
        _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(p.d)), _mm512_cvtepi32_ps(dot), acc[i]);
    if constexpr (kMin)
      acc[i] = _mm512_fmadd_ps(mw, _mm512_castsi512_ps(broadcast8(p.dsum)), acc[i]);
  }
}

// accumulate for the formats with a scale (dw_lo, dw_hi) per 16 elements: words 0-1 and 2-3 are
// two int32 sums; kMin: minus each half's minimum (mw_lo, mw_hi: dmin * mn per lane) times the
// activations' sum over that half.
template <int RX, int kZeroShift, bool kMin>
static inline void accumulate_halves(const __m512i (&u)[4], __m512 dw_lo, __m512 dw_hi,
                                     __m512 mw_lo, __m512 mw_hi, const PreparedBlock* x,
                                     int64_t x_stride, __m512 (&acc)[RX]) {
#pragma GCC unroll 8
  for (int i = 0; i < RX; ++i) {
    const PreparedBlock& p = x[i * x_stride];
    const __m512i lo_sums = broadcast8(p.neg_sum_lo);
    const __m512i hi_sums = _mm512_sub_epi32(broadcast8(p.neg_sum), lo_sums);
    __m512i dot_lo =
        kZeroShift > 0 ? _mm512_slli_epi32(lo_sums, kZeroShift) : _mm512_setzero_si512();
    __m512i dot_hi =
        kZeroShift > 0 ? _mm512_slli_epi32(hi_sums, kZeroShift) : _mm512_setzero_si512();
    dot_lo = _mm512_dpbusd_epi32(dot_lo, u[0], broadcast8(p.q));
    dot_lo = _mm512_dpbusd_epi32(dot_lo, u[1], broadcast8(p.q + 8));
    dot_hi = _mm512_dpbusd_epi32(dot_hi, u[2], broadcast8(p.q + 16));
    dot_hi = _mm512_dpbusd_epi32(dot_hi, u[3], broadcast8(p.q + 24));
    const __m512 dx = _mm512_set1_ps(p.d);
    if constexpr (kMin) {
      // Both halves' scaled sums minus their minimums (the sums are negated), then one
      // multiply-add by the activation scale: 5 operations where scaling each term took 8.
      __m512 t = _mm512_mul_ps(dw_lo, _mm512_cvtepi32_ps(dot_lo));
      t = _mm512_fmadd_ps(dw_hi, _mm512_cvtepi32_ps(dot_hi), t);
      t = _mm512_fmadd_ps(mw_lo, _mm512_cvtepi32_ps(lo_sums), t);
      t = _mm512_fmadd_ps(mw_hi, _mm512_cvtepi32_ps(hi_sums), t);
      acc[i] = _mm512_fmadd_ps(t, dx, acc[i]);
    } else {
      acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dw_lo, dx), _mm512_cvtepi32_ps(dot_lo), acc[i]);
      acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(dw_hi, dx), _mm512_cvtepi32_ps(dot_hi), acc[i]);
    }
  }
}

// The IQ4 levels plus 128 (so unsigned, zero point 128) in every 128-bit lane, for vpshufb.
static inline __m512i iq4_levels() {
  const __m128i levels = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lowbit::kIq4Values));
  return _mm512_broadcast_i32x4(_mm_add_epi8(levels, _mm_set1_epi8(static_cast<char>(0x80))));
}

// Two words of nibbles (a: elements 0-7 low, 16-23 high; b: 8-15, 24-31) as the four words of a
// block of 32, each nibble through the IQ4 levels.
static inline void iq4_words(__m512i a, __m512i b, __m512i levels, __m512i (&u)[4]) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  u[0] = _mm512_shuffle_epi8(levels, _mm512_and_si512(a, low4));
  u[1] = _mm512_shuffle_epi8(levels, _mm512_and_si512(b, low4));
  u[2] = _mm512_shuffle_epi8(levels, _mm512_and_si512(_mm512_srli_epi16(a, 4), low4));
  u[3] = _mm512_shuffle_epi8(levels, _mm512_and_si512(_mm512_srli_epi16(b, 4), low4));
}

// GGML's bytes per block of 32 (as quant_blocks.h, whose inline helpers this file must not pull
// in), and per block of 32 for 8 rows.
template <RowFormat F>
constexpr int64_t kBlockBytes = F == RowFormat::kQ8_0   ? 34
                                : F == RowFormat::kQ4_0 ? 18
                                : F == RowFormat::kQ4_1 ? 20
                                : F == RowFormat::kQ5_0 ? 22
                                : F == RowFormat::kQ5_1 ? 24
                                                        : lowbit::kIQ4_NLBytes;
template <RowFormat F>
constexpr int64_t kGroupBlockBytes = kRows* kBlockBytes<F>;

// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: blocks of 32.
template <RowFormat F, int RX>
void block_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, __m512 (&acc)[RX]) {
  constexpr bool kMin = F == RowFormat::kQ4_1 || F == RowFormat::kQ5_1;
  constexpr bool kFifthBit = F == RowFormat::kQ5_0 || F == RowFormat::kQ5_1;
  constexpr int kZeroShift = F == RowFormat::kQ8_0 || F == RowFormat::kIQ4_NL ? 7
                             : F == RowFormat::kQ4_0                          ? 3
                             : F == RowFormat::kQ5_0                          ? 4
                                                                              : 0;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = g + b * kGroupBlockBytes<F>;
    const __m512 dw = row_pairs(_mm512_castps256_ps512(f16x8(block)));
    const __m512 mw = kMin ? row_pairs(_mm512_castps256_ps512(f16x8(block + 16))) : dw;
    const uint8_t* qh = block + (kMin ? 32 : 16);  // Q5 only
    const uint8_t* qs = qh + (kFifthBit ? 32 : 0);
    __m512i u[4];
    if constexpr (F == RowFormat::kQ8_0) {
      const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) u[c] = _mm512_xor_si512(load512(qs + 64 * c), flip);
    } else if constexpr (F == RowFormat::kIQ4_NL) {
      iq4_words(load512(qs), load512(qs + 64), iq4_levels(), u);
    } else {
      // Word 0 holds elements 0-7 (low nibbles) and 16-23 (high), word 1 8-15 and 24-31.
      const __m512i a = load512(qs), b1 = load512(qs + 64);
      u[0] = _mm512_and_si512(a, low4);
      u[1] = _mm512_and_si512(b1, low4);
      u[2] = _mm512_and_si512(_mm512_srli_epi16(a, 4), low4);
      u[3] = _mm512_and_si512(_mm512_srli_epi16(b1, 4), low4);
      if constexpr (kFifthBit) {
        // Qh byte t of the 8 rows is the fifth-bit mask of word t's bytes: add 16 where set.
        const __m512i sixteen = _mm512_set1_epi8(16);
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) {
          uint64_t bits;
          std::memcpy(&bits, qh + 8 * t, 8);
          u[t] = _mm512_mask_add_epi8(u[t], static_cast<__mmask64>(bits), u[t], sixteen);
        }
      }
    }
    accumulate<RX, kZeroShift, kMin>(u, dw, mw, x + b, blocks, acc);
  }
}

// The 6-bit scales and minimums of 8 Q4_K / Q5_K rows from their 3 interleaved scale words at s
// (unpack_scales_k4, a row per 32-bit lane): byte t of `low` is group t's scale (lanes 0-7) and
// minimum (lanes 8-15); `high` has groups 4 + t.
static inline void k4_scales(const uint8_t* s, __m512i& low, __m512i& high) {
  const __m256i m3f = _mm256_set1_epi8(0x3f), m0f = _mm256_set1_epi8(0x0f);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const __m256i s0 = load256(s), s1 = load256(s + 32), s2 = load256(s + 64);
  const __m256i sc_hi =
      _mm256_or_si256(_mm256_and_si256(s2, m0f), _mm256_and_si256(_mm256_srli_epi32(s0, 2), m30));
  const __m256i mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s2, 4), m0f),
                                        _mm256_and_si256(_mm256_srli_epi32(s1, 2), m30));
  low = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(s0, m3f)),
                           _mm256_and_si256(s1, m3f), 1);
  high = _mm512_inserti64x4(_mm512_castsi256_si512(sc_hi), mn_hi, 1);
}

// Group `group`'s scales (lanes 0-7) and minimums (8-15) of k4_scales times dg (d for lanes 0-7,
// -dmin for 8-15), as lane pairs: dw the rows' scales, mw their minimums.
static inline void k4_group_scales(__m512i low, __m512i high, int group, __m512 dg, __m512& dw,
                                   __m512& mw) {
  const __m512i bytes = _mm512_and_si512(
      _mm512_srli_epi32(group < 4 ? low : high, static_cast<unsigned>(8 * (group % 4))),
      _mm512_set1_epi32(0xff));
  const __m512 scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(bytes), dg);
  dw = row_pairs(scaled);
  mw = row_pairs(scaled, true);
}

// Q4_K: super-blocks of 256, 8 groups of 32 with 6-bit scales and minimums.
template <int RX>
void q4_k_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, __m512 (&acc)[RX]) {
  constexpr int64_t kBytes = kRows * kquant::kQ4_KBytes;
  const __m512i low4 = _mm512_set1_epi8(0x0f), high4 = _mm512_set1_epi8(static_cast<char>(0xf0));
  // The high nibbles are used where they are (16 x the value: no shift, and the int32 sums stay
  // far from overflow), so their groups' scales carry a factor 1/16 instead. Scaling by a power
  // of two is exact, so the result is the same bits as with shifted nibbles.
  const __m512 sixteenth = concat(_mm256_set1_ps(1.0f / 16), _mm256_set1_ps(1.0f));
  for (int64_t sb = 0; sb < blocks / kquant::kGroups; ++sb) {
    const uint8_t* block = g + sb * kBytes;
    // d for lanes 0-7 and -dmin for lanes 8-15, one row per lane.
    const __m512 d = concat(f16x8(block), _mm256_sub_ps(_mm256_setzero_ps(), f16x8(block + 16)));
    const __m512 d_high = _mm512_mul_ps(d, sixteenth);
    __m512i low, high;
    k4_scales(block + 32, low, high);
    const uint8_t* qs = block + 128;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      // Words 4j..4j+3: low nibbles are group 2j, high nibbles group 2j + 1. (Two separate arrays
      // and calls: choosing between them by reference made GCC keep both on the stack.)
      // The words are loaded again for the high nibbles (from L1): keeping them live through
      // the first group's accumulation spilled the 8-row prefill tile.
      __m512 dw, mw;
      {
        __m512i lo[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) lo[c] = _mm512_and_si512(load512(qs + 64 * (4 * j + c)), low4);
        k4_group_scales(low, high, 2 * j, d, dw, mw);
        accumulate<RX, 0, true>(lo, dw, mw, x + sb * kquant::kGroups + 2 * j, blocks, acc);
      }
      {
        __m512i hi[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) hi[c] = _mm512_and_si512(load512(qs + 64 * (4 * j + c)), high4);
        k4_group_scales(low, high, 2 * j + 1, d_high, dw, mw);
        accumulate<RX, 0, true>(hi, dw, mw, x + sb * kquant::kGroups + 2 * j + 1, blocks, acc);
      }
    }
  }
}

// Q5_K: Q4_K's super-blocks with a fifth bit per value, bit g of qh byte l for element l of group
// g (the interleaved order is GGML's: d, dmin, scales, qh words 0-3, qs words 0-15).
template <int RX>
void q5_k_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, __m512 (&acc)[RX]) {
  constexpr int64_t kBytes = kRows * kquant::kQ5_KBytes;
  constexpr int64_t kScales = kRows * 4, kQh = kScales + kRows * 12, kQs = kQh + kRows * 32;
  const __m512i low4 = _mm512_set1_epi8(0x0f), low5 = _mm512_set1_epi8(0x1f);
  for (int64_t sb = 0; sb < blocks / kquant::kGroups; ++sb) {
    const uint8_t* block = g + sb * kBytes;
    const __m512 d = concat(f16x8(block), _mm256_sub_ps(_mm256_setzero_ps(), f16x8(block + 16)));
    __m512i low, high;
    k4_scales(block + kScales, low, high);
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      // Group t: the low (t even) or high nibbles of qs words 4(t / 2) + c, bit t of qh word c
      // as the fifth bit.
      __m512i u[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        __m512i qs = load512(block + kQs + 64 * (4 * (t / 2) + c));
        if (t % 2) qs = _mm512_srli_epi16(qs, 4);
        __m512i qh = load512(block + kQh + 64 * c);
        if (t < 4) qh = _mm512_slli_epi16(qh, static_cast<unsigned>(4 - t));
        if (t > 4) qh = _mm512_srli_epi16(qh, static_cast<unsigned>(t - 4));
        // Bits 0-3 from qs, bit 4 from qh (0xca: low4 ? qs : qh).
        u[c] = _mm512_and_si512(_mm512_ternarylogic_epi32(low4, qs, qh, 0xca), low5);
      }
      __m512 dw, mw;
      k4_group_scales(low, high, t, d, dw, mw);
      accumulate<RX, 0, true>(u, dw, mw, x + sb * kquant::kGroups + t, blocks, acc);
    }
  }
}

// Q6_K: super-blocks of 256 in two halves of 128; each group of 32 has two 16-element int8
// scales (words 0-1 and words 2-3), so a group is two int32 sums per lane.
template <int RX>
void q6_k_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, __m512 (&acc)[RX]) {
  // The interleaved order (interleaved_rows.h): d, scale pairs, then per half ql words 0-3, qh
  // words 0-3 and ql words 4-7.
  constexpr int64_t kBytes = kRows * kquant::kQ6_KBytes;
  constexpr int64_t kD = 0, kScales = kRows * 2, kHalves = kScales + kRows * 16;
  constexpr int64_t kHalfBytes = kRows * 96, kQh = kRows * 32, kQlHigh = kRows * 64;
  const __m512i low4 = _mm512_set1_epi8(0x0f), low6 = _mm512_set1_epi8(0x3f);
  const __m512i first = _mm512_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14);
  const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(1));
  for (int64_t sb = 0; sb < blocks / kquant::kGroups; ++sb) {
    const uint8_t* block = g + sb * kBytes;
    const __m512 d = row_pairs(_mm512_castps256_ps512(f16x8(block + kD)));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        // Group 4h + t (kquant::group_values_q6_k): low 4 bits from the low (t < 2) or high
        // nibbles of ql words 8h + 4 * (t % 2) + c, top 2 bits from bit pair t of qh word 4h + c.
        const uint8_t* half = block + kHalves + h * kHalfBytes;
        __m512i u[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          __m512i ql = load512(half + (t % 2 ? kQlHigh : 0) + 64 * c);
          if (t >= 2) ql = _mm512_srli_epi16(ql, 4);
          __m512i qh = load512(half + kQh + 64 * c);
          if (t < 2) qh = _mm512_slli_epi16(qh, 4 - 2 * t);
          if (t == 3) qh = _mm512_srli_epi16(qh, 2);
          // Bits 0-3 from ql, 4-7 from qh (0xca: low4 ? ql : qh), then the top pair cleared.
          u[c] = _mm512_and_si512(_mm512_ternarylogic_epi32(low4, ql, qh, 0xca), low6);
        }
        // Scales 2(4h + t) and 2(4h + t) + 1 of the 8 rows, times each row's d.
        const __m512 scales = _mm512_mul_ps(
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                reinterpret_cast<const __m128i*>(block + kScales + 16 * (4 * h + t))))),
            d);
        const __m512 dw_lo = _mm512_permutexvar_ps(first, scales);
        const __m512 dw_hi = _mm512_permutexvar_ps(second, scales);
        // Zero point 32: the accumulators start at -32 * the lane's activation sums.
        accumulate_halves<RX, 5, false>(u, dw_lo, dw_hi, dw_lo, dw_hi,
                                        x + sb * kquant::kGroups + 4 * h + t, blocks, acc);
      }
    }
  }
}

// IQ4_XS: super-blocks of 256, 8 groups of 32 with a 6-bit scale each (minus 32) and IQ4_NL's
// nibbles.
template <int RX>
void iq4_xs_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, __m512 (&acc)[RX]) {
  constexpr int64_t kBytes = kRows * lowbit::kIQ4_XSBytes;
  constexpr int64_t kScalesH = kRows * 2, kScalesL = kRows * 4, kQs = kRows * 8;
  const __m512i levels = iq4_levels();
  const __m256i m0f = _mm256_set1_epi32(0x0f), m03 = _mm256_set1_epi32(3);
  for (int64_t sb = 0; sb < blocks / 8; ++sb) {
    const uint8_t* block = g + sb * kBytes;
    const __m256 d = f16x8(block);
    // One row per 32-bit lane: group t's scale is nibble t of `low` with bits 2t, 2t + 1 of
    // `high` on top (lowbit::iq4_xs_scale).
    const __m256i high =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kScalesH)));
    const __m256i low = load256(block + kScalesL);
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      const __m256i sc = _mm256_or_si256(
          _mm256_and_si256(_mm256_srli_epi32(low, 4 * t), m0f),
          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(high, 2 * t), m03), 4));
      const __m256 scaled =
          _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sc, _mm256_set1_epi32(32))), d);
      const __m512 dw = row_pairs(_mm512_castps256_ps512(scaled));
      // Group t is qs words 2t and 2t + 1.
      __m512i u[4];
      iq4_words(load512(block + kQs + 128 * t), load512(block + kQs + 128 * t + 64), levels, u);
      accumulate<RX, 7, false>(u, dw, dw, x + sb * 8 + t, blocks, acc);
    }
  }
}

// Q3_K: super-blocks of 256, 8 groups of 32 of 3-bit values (zero point 4) with a 6-bit scale
// (minus 32) per 16.
template <int RX>
void q3_k_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, __m512 (&acc)[RX]) {
  constexpr int64_t kBytes = kRows * lowbit::kQ3_KBytes;
  constexpr int64_t kScales = kRows * 2, kHmask = kScales + kRows * 12, kQs = kHmask + kRows * 32;
  const __m512i three = _mm512_set1_epi8(3), seven = _mm512_set1_epi8(7);
  const __m256i m0f = _mm256_set1_epi8(0x0f), m03 = _mm256_set1_epi8(3);
  const __m256i byte = _mm256_set1_epi32(0xff), thirty_two = _mm256_set1_epi32(32);
  for (int64_t sb = 0; sb < blocks / 8; ++sb) {
    const uint8_t* block = g + sb * kBytes;
    const __m256 d = f16x8(block);
    // The 12 scale bytes of each row (a row per 32-bit lane) as 16: byte j of sc[s / 4] is
    // scale s + 32 (lowbit::q3_k_scale): a nibble of bytes 0-7, two bits of bytes 8-11.
    const __m256i w0 = load256(block + kScales), w1 = load256(block + kScales + 32);
    const __m256i w2 = load256(block + kScales + 64);
    const auto top = [&](int shift) {
      return _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w2, shift), m03), 4);
    };
    const __m256i sc[4] = {
        _mm256_or_si256(_mm256_and_si256(w0, m0f), top(0)),
        _mm256_or_si256(_mm256_and_si256(w1, m0f), top(2)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w0, 4), m0f), top(4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w1, 4), m0f), top(6))};
    // Scale s of the 8 rows times d, a row's value in lanes 2r and 2r + 1.
    const auto scale = [&](int s) {
      const __m256i v = _mm256_and_si256(_mm256_srli_epi32(sc[s / 4], 8 * (s % 4)), byte);
      return row_pairs(_mm512_castps256_ps512(
          _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, thirty_two)), d)));
    };
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      // Group t (lowbit::decode_group): bits 2(t % 4), +1 of qs words 4(t / 4) + c, and bit t of
      // hmask word c as the third bit.
      __m512i u[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i qs = _mm512_srli_epi16(load512(block + kQs + 64 * (4 * (t / 4) + c)),
                                             static_cast<unsigned>(2 * (t % 4)));
        __m512i hm = load512(block + kHmask + 64 * c);
        if (t < 2) hm = _mm512_slli_epi16(hm, static_cast<unsigned>(2 - t));
        if (t > 2) hm = _mm512_srli_epi16(hm, static_cast<unsigned>(t - 2));
        // Bits 0-1 from qs, bit 2 from hmask (0xca: three ? qs : hm).
        u[c] = _mm512_and_si512(_mm512_ternarylogic_epi32(three, qs, hm, 0xca), seven);
      }
      const __m512 dw_lo = scale(2 * t), dw_hi = scale(2 * t + 1);
      accumulate_halves<RX, 2, false>(u, dw_lo, dw_hi, dw_lo, dw_hi, x + sb * 8 + t, blocks, acc);
    }
  }
}

// Q2_K: super-blocks of 256, 8 groups of 32 of 2-bit values with a 4-bit scale and minimum per
// 16.
template <int RX>
void q2_k_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, __m512 (&acc)[RX]) {
  constexpr int64_t kBytes = kRows * lowbit::kQ2_KBytes;
  constexpr int64_t kScales = kRows * 4, kQs = kScales + kRows * 16;
  const __m512i three = _mm512_set1_epi8(3), low4 = _mm512_set1_epi32(0x0f);
  const __m512i first = _mm512_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14);
  const __m512i second = _mm512_add_epi32(first, _mm512_set1_epi32(1));
  for (int64_t sb = 0; sb < blocks / 8; ++sb) {
    const uint8_t* block = g + sb * kBytes;
    const __m512 d = row_pairs(_mm512_castps256_ps512(f16x8(block)));
    const __m512 dmin = row_pairs(_mm512_castps256_ps512(f16x8(block + kRows * 2)));
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      // Group t's scale/min bytes of the 8 rows: lane 2r the first half's, 2r + 1 the second's.
      const __m512i bytes = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kScales + 16 * t)));
      const __m512 sc = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(bytes, low4)), d);
      const __m512 mn = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(bytes, 4)), dmin);
      // Bits 2(t % 4), +1 of qs words 4(t / 4) + c.
      __m512i u[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        u[c] = _mm512_and_si512(_mm512_srli_epi16(load512(block + kQs + 64 * (4 * (t / 4) + c)),
                                                  static_cast<unsigned>(2 * (t % 4))),
                                three);
      }
      accumulate_halves<RX, 0, true>(
          u, _mm512_permutexvar_ps(first, sc), _mm512_permutexvar_ps(second, sc),
          _mm512_permutexvar_ps(first, mn), _mm512_permutexvar_ps(second, mn), x + sb * 8 + t,
          blocks, acc);
    }
  }
}

// Q4_Z128: blocks of 128 with one scale d and zero point z per row. Per activation row, the
// sub-blocks' integer sums scaled by their activation scales into t, then acc += d * t and the
// zero point as a minimum, -(d * z) (exact in fp32), times the 128 activations' scaled sum
// (dsum4, prepared once) in each row's even lane: 2 float operations per sub-block and 2 per
// block where Q4_0 takes 3 per sub-block (its zero shift, scale product and multiply-add).
template <int RX>
void q4_z128_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, __m512 (&acc)[RX]) {
  constexpr int64_t kBytes = kRows * q4z::kBytes;
  constexpr int64_t kZ = kRows * 2, kQs = kRows * 4;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int64_t sb = 0; sb < blocks / q4z::kSubBlocks; ++sb) {
    const uint8_t* block = g + sb * kBytes;
    const __m256 d = f16x8(block);
    const __m256 z = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + kZ))));
    const uint8_t* qs = block + kQs;
    const PreparedBlock* xb = x + sb * q4z::kSubBlocks;
    __m512 t[RX];
#pragma GCC unroll 4
    for (int j = 0; j < q4z::kSubBlocks; ++j) {
      // Words 2j and 2j + 1 as Q4_0's two words.
      const __m512i a = load512(qs + 128 * j), b1 = load512(qs + 128 * j + 64);
      __m512i u[4];
      u[0] = _mm512_and_si512(a, low4);
      u[1] = _mm512_and_si512(b1, low4);
      u[2] = _mm512_and_si512(_mm512_srli_epi16(a, 4), low4);
      u[3] = _mm512_and_si512(_mm512_srli_epi16(b1, 4), low4);
#pragma GCC unroll 8
      for (int i = 0; i < RX; ++i) {
        const PreparedBlock& p = xb[i * blocks + j];
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], broadcast8(p.q));
        dot = _mm512_dpbusd_epi32(dot, u[1], broadcast8(p.q + 8));
        dot = _mm512_dpbusd_epi32(dot, u[2], broadcast8(p.q + 16));
        dot = _mm512_dpbusd_epi32(dot, u[3], broadcast8(p.q + 24));
        t[i] = j == 0 ? _mm512_mul_ps(_mm512_set1_ps(p.d), _mm512_cvtepi32_ps(dot))
                      : _mm512_fmadd_ps(_mm512_set1_ps(p.d), _mm512_cvtepi32_ps(dot), t[i]);
      }
    }
    const __m512 dw = row_pairs(_mm512_castps256_ps512(d));
    const __m512 mw =
        row_pairs(_mm512_castps256_ps512(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), d), z)));
#pragma GCC unroll 8
    for (int i = 0; i < RX; ++i) {
      const __m512 dsum4 = _mm512_maskz_mov_ps(0x5555, _mm512_set1_ps(xb[i * blocks].dsum4));
      acc[i] = _mm512_fmadd_ps(mw, dsum4, _mm512_fmadd_ps(dw, t[i], acc[i]));
    }
  }
}

// 8 weight rows (group g) against RX activation rows.
template <RowFormat F, int RX>
void group_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, float* y, int64_t ldy) {
  __m512 acc[RX];
  for (int i = 0; i < RX; ++i) acc[i] = _mm512_setzero_ps();
  if constexpr (F == RowFormat::kQ4_K) {
    q4_k_tile<RX>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kQ5_K) {
    q5_k_tile<RX>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kQ6_K) {
    q6_k_tile<RX>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kIQ4_XS) {
    iq4_xs_tile<RX>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kQ3_K) {
    q3_k_tile<RX>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kQ2_K) {
    q2_k_tile<RX>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kQ4_Z128) {
    q4_z128_tile<RX>(g, x, blocks, acc);
  } else {
    block_tile<F, RX>(g, x, blocks, acc);
  }
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int i = 0; i < RX; ++i) {
    // Swap neighbouring lanes and add: lane 2r holds row r's sum.
    const __m512 pair_sums = _mm512_add_ps(acc[i], _mm512_permute_ps(acc[i], 0xb1));
    _mm256_storeu_ps(y + i * ldy, _mm512_castps512_ps256(_mm512_permutexvar_ps(even, pair_sums)));
  }
}

// Every group against all m activation rows, 8 at a time and the rest in one tile: a speculative
// verify step's 2-5 rows in tiles of 2 + 1 or 4 + 1 unpacked the weights twice (one thread,
// weights in L2: 3 rows 4.17 -> 3.42 ms, 5 rows 5.95 -> 5.48 in one tile). A group's weights stay
// in L1 (L2 for long rows) while the activation rows stream past.
template <RowFormat F>
void gemm(const uint8_t* w, int64_t n, const PreparedBlock* x, int64_t m, int64_t k, float* y,
          int64_t ldy) {
  const int64_t blocks = k / 32;
  const int64_t group_bytes = kRows * row_bytes(F, k);
  for (int64_t g = 0; g < n / kRows; ++g) {
    const uint8_t* wg = w + g * group_bytes;
    float* yg = y + g * kRows;
    int64_t i = 0;
    for (; i + 8 <= m; i += 8) group_tile<F, 8>(wg, x + i * blocks, blocks, yg + i * ldy, ldy);
    if (i < m) {
      with_row_count<7>(
          m - i, [&]<int R>() { group_tile<F, R>(wg, x + i * blocks, blocks, yg + i * ldy, ldy); });
    }
  }
}

}  // namespace

void int8_interleaved_gemm_vnni(RowFormat format, const void* w, int64_t n, const void* x,
                                int64_t m, int64_t k, float* y, int64_t ldy) {
  const auto* bytes = static_cast<const uint8_t*>(w);
  const auto* prepared = static_cast<const PreparedBlock*>(x);
  switch (format) {
    case RowFormat::kQ8_0:
      return gemm<RowFormat::kQ8_0>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kQ4_0:
      return gemm<RowFormat::kQ4_0>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kQ4_1:
      return gemm<RowFormat::kQ4_1>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kQ5_0:
      return gemm<RowFormat::kQ5_0>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kQ5_1:
      return gemm<RowFormat::kQ5_1>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kQ4_K:
      return gemm<RowFormat::kQ4_K>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kQ5_K:
      return gemm<RowFormat::kQ5_K>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kQ6_K:
      return gemm<RowFormat::kQ6_K>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kIQ4_NL:
      return gemm<RowFormat::kIQ4_NL>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kIQ4_XS:
      return gemm<RowFormat::kIQ4_XS>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kQ3_K:
      return gemm<RowFormat::kQ3_K>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kQ2_K:
      return gemm<RowFormat::kQ2_K>(bytes, n, prepared, m, k, y, ldy);
    case RowFormat::kQ4_Z128:
      return gemm<RowFormat::kQ4_Z128>(bytes, n, prepared, m, k, y, ldy);
    default:
      break;
  }
}

}  // namespace lm::kernels

#pragma GCC diagnostic pop

#else  // No VNNI in this build: the table never points here (isa_supported(kAvx512Vnni) is false).

namespace lm::kernels {
void int8_interleaved_gemm_vnni(RowFormat, const void*, int64_t, const void*, int64_t, int64_t,
                                float*, int64_t) {}
}  // namespace lm::kernels

#endif
