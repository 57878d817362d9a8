// The interleaved int8 GEMM on AVX2 (see int8_interleaved.h), for CPUs without AVX-512 VNNI (AMD
// Zen 2/3, Intel client CPUs, older cloud instances) and AVX-512 without VNNI. Built with
// -mavx2 -mfma -mf16c and used only when cpuid reports them. Built twice more for the avx-vnni
// level (src/kernels/cpu/CMakeLists.txt), with LM_INT8_DPBUSD_VEX (-mavxvnni: Alder Lake and
// later client CPUs, Sierra Forest, Zen 5) or LM_INT8_DPBUSD_EVEX (-mavx512vnni -mavx512vl:
// AVX-512 CPUs, where the level's tests run): there each word's half is one vpdpbusd instead (the
// dot functions below; Q8_0 and IQ4 as w + 128, accumulate_signed), the same exact int32 sums, so
// the same bits as every other level.
//
// The weight words are the VNNI kernel's (int8_interleaved_vnni.cc), each 64-byte word cut into
// two 256-bit halves: rows 0-3 and rows 4-7, int32 lane 2r' + e of half h covering row 4h + r''s
// elements 8c + 4e .. 8c + 4e + 3 of word c. AVX2 has no vpdpbusd, so a word is vpmaddubsw (u8 x
// s8 into int16 pair sums) and vpmaddwd by ones (pairs of those into int32). The unsigned
// formats (nibbles, Q5's 5 bits, Q6_K's 6, Q3_K's 3, Q2_K's 2) sum their words' int16 lanes
// before widening: at most 4 words x 2 x 31 x 127 (Q5) or 2 x 2 x 63 x 127 (Q6_K's 16-element
// halves) < 2^15, so nothing saturates. Q8_0 and the IQ4 levels are signed and reach 128 in
// magnitude, so they take llama.cpp's sign trick (|w| as u8, the activation given w's sign: at
// most 2 x 128 x 127 < 2^15 per pair) and widen every word. Zero points and minimums are
// taken back exactly as the VNNI kernel takes them (the same prepared blocks), so every block's
// int32 sum is the same integer, the float operations are the same in the same order, and the
// results are the VNNI kernel's bits: a (weight row, activation row) result does not depend on
// the tile, the batch or the ISA level among those with an interleaved GEMM.
// NOTE: as in kernels_avx2.cc, nothing here may instantiate inline functions or templates with
// external linkage: only internal-linkage helpers and intrinsics.
#include "kernels/cpu/int8_interleaved.h"

// Which build of this file: AVX2's, or the avx-vnni level's in one of its encodings.
#if defined(LM_INT8_DPBUSD_VEX)
#define LM_INT8_DPBUSD 1
#define LM_INT8_INTERLEAVED_GEMM int8_interleaved_gemm_avx_vnni
#elif defined(LM_INT8_DPBUSD_EVEX)
#define LM_INT8_DPBUSD 1
#define LM_INT8_INTERLEAVED_GEMM int8_interleaved_gemm_avx_vnni_evex
#else
#define LM_INT8_INTERLEAVED_GEMM int8_interleaved_gemm_avx2
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

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

using PreparedBlock = Int8InterleavedBlock;
constexpr int64_t kRows = kInterleavedRows;

static inline __m256i broadcast8(const void* p) {
  int64_t v;
  std::memcpy(&v, p, 8);
  return _mm256_set1_epi64x(v);
}

static inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 8 fp16 values (one per row) as fp32.
static inline __m256 f16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Half h's lanes 2r' and 2r' + 1 take value 4h + r' of v (one value per row).
static inline __m256 row_pairs(__m256 v, int h) {
  return _mm256_permutevar8x32_ps(
      v, h ? _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7) : _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
}

// Half h of word c of an interleaved field at p (64 bytes a word).
static inline __m256i half_word(const uint8_t* p, int c, int h) {
  return load256(p + 64 * c + 32 * h);
}

#if defined(LM_INT8_DPBUSD)
// The signed formats' weights as unsigned bytes for vpdpbusd: w + 128 (xor 0x80), with the zero
// point 2^kSignedZeroShift = 128 taken back through the activations' sums, as the VNNI kernel
// does -- rather than moving w's sign onto every row's activations; the same int32 sums.
constexpr int kSignedZeroShift = 7;

static inline void signed_to_unsigned(__m256i (&w)[4]) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) w[c] = _mm256_xor_si256(w[c], flip);
}

// acc + each int32 lane's 4 products of u's bytes (unsigned) and s's (signed), exactly.
static inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
#if defined(LM_INT8_DPBUSD_VEX)
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
  return _mm256_dpbusd_epi32(acc, u, s);
#endif
}

// init + int32 lanes: the sum over words c < 4 of unsigned values times the broadcast
// activations q + 8c. Two chains, joined at the end, keep more vpdpbusd in flight.
static inline __m256i dot4_unsigned(const __m256i (&u)[4], const int8_t* q, __m256i init) {
  const __m256i s0 = dpbusd(dpbusd(init, u[0], broadcast8(q)), u[2], broadcast8(q + 16));
  const __m256i s1 =
      dpbusd(dpbusd(_mm256_setzero_si256(), u[1], broadcast8(q + 8)), u[3], broadcast8(q + 24));
  return _mm256_add_epi32(s0, s1);
}

// The same over two words, from zero.
static inline __m256i dot2_unsigned(__m256i u0, __m256i u1, const int8_t* q) {
  const __m256i zero = _mm256_setzero_si256();
  return _mm256_add_epi32(dpbusd(zero, u0, broadcast8(q)), dpbusd(zero, u1, broadcast8(q + 8)));
}
#else
// init + int32 lanes: the sum over words c < 4 of unsigned values below 32 times the broadcast
// activations q + 8c (the int16 sums stay below 2^15, see the top).
static inline __m256i dot4_unsigned(const __m256i (&u)[4], const int8_t* q, __m256i init) {
  __m256i s = _mm256_maddubs_epi16(u[0], broadcast8(q));
  s = _mm256_add_epi16(s, _mm256_maddubs_epi16(u[1], broadcast8(q + 8)));
  s = _mm256_add_epi16(s, _mm256_maddubs_epi16(u[2], broadcast8(q + 16)));
  s = _mm256_add_epi16(s, _mm256_maddubs_epi16(u[3], broadcast8(q + 24)));
  return _mm256_add_epi32(init, _mm256_madd_epi16(s, _mm256_set1_epi16(1)));
}

// The same over two words (values below 64).
static inline __m256i dot2_unsigned(__m256i u0, __m256i u1, const int8_t* q) {
  const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(u0, broadcast8(q)),
                                     _mm256_maddubs_epi16(u1, broadcast8(q + 8)));
  return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

// Signed weights w (|w| <= 128) with aw = |w|: each word widened on its own.
static inline __m256i dot4_signed(const __m256i (&w)[4], const __m256i (&aw)[4], const int8_t* q) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m256i sx = _mm256_sign_epi8(broadcast8(q + 8 * c), w[c]);
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(aw[c], sx), ones));
  }
  return sum;
}
#endif

// One block of 32 for one half (4 weight rows: words u[0..4), their scales dw and minimums mw
// per lane) against RX activation rows: x[i * x_stride] is row i's prepared block. kZeroShift:
// the zero point 2^kZeroShift is taken back through -2^kZeroShift * the activations' sums.
template <int RX, int kZeroShift, bool kMin>
static inline void accumulate(const __m256i (&u)[4], __m256 dw, __m256 mw, const PreparedBlock* x,
                              int64_t x_stride, __m256 (&acc)[RX]) {
#pragma GCC unroll 8
  for (int i = 0; i < RX; ++i) {
    const PreparedBlock& p = x[i * x_stride];
    const __m256i dot =
        dot4_unsigned(u, p.q,
                      kZeroShift > 0 ? _mm256_slli_epi32(broadcast8(p.neg_sum), kZeroShift)
                                     : _mm256_setzero_si256());
    acc[i] =
        _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(p.d)), _mm256_cvtepi32_ps(dot), acc[i]);
    if constexpr (kMin)
      acc[i] = _mm256_fmadd_ps(mw, _mm256_castsi256_ps(broadcast8(p.dsum)), acc[i]);
  }
}

// accumulate for signed weights (Q8_0, IQ4): no zero point, no minimum.
#if defined(LM_INT8_DPBUSD)
// (signed_to_unsigned's w + 128)
template <int RX>
static inline void accumulate_signed(const __m256i (&w)[4], __m256 dw, const PreparedBlock* x,
                                     int64_t x_stride, __m256 (&acc)[RX]) {
  __m256i u[4] = {w[0], w[1], w[2], w[3]};
  signed_to_unsigned(u);
  accumulate<RX, kSignedZeroShift, false>(u, dw, dw, x, x_stride, acc);
}
#else
template <int RX>
static inline void accumulate_signed(const __m256i (&w)[4], __m256 dw, const PreparedBlock* x,
                                     int64_t x_stride, __m256 (&acc)[RX]) {
  __m256i aw[4];
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) aw[c] = _mm256_abs_epi8(w[c]);
#pragma GCC unroll 8
  for (int i = 0; i < RX; ++i) {
    const PreparedBlock& p = x[i * x_stride];
    const __m256i dot = dot4_signed(w, aw, p.q);
    acc[i] =
        _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(p.d)), _mm256_cvtepi32_ps(dot), acc[i]);
  }
}
#endif

// accumulate for the formats with a scale (dw_lo, dw_hi) per 16 elements: words 0-1 and 2-3 are
// two int32 sums; kMin: minus each half's minimum (mw_lo, mw_hi) times the activations' sum over
// it. The float operations are the VNNI kernel's, in its order.
template <int RX, int kZeroShift, bool kMin>
static inline void accumulate_halves(const __m256i (&u)[4], __m256 dw_lo, __m256 dw_hi,
                                     __m256 mw_lo, __m256 mw_hi, const PreparedBlock* x,
                                     int64_t x_stride, __m256 (&acc)[RX]) {
#pragma GCC unroll 8
  for (int i = 0; i < RX; ++i) {
    const PreparedBlock& p = x[i * x_stride];
    const __m256i lo_sums = broadcast8(p.neg_sum_lo);
    const __m256i hi_sums = _mm256_sub_epi32(broadcast8(p.neg_sum), lo_sums);
    __m256i dot_lo = dot2_unsigned(u[0], u[1], p.q);
    __m256i dot_hi = dot2_unsigned(u[2], u[3], p.q + 16);
    if constexpr (kZeroShift > 0) {
      dot_lo = _mm256_add_epi32(dot_lo, _mm256_slli_epi32(lo_sums, kZeroShift));
      dot_hi = _mm256_add_epi32(dot_hi, _mm256_slli_epi32(hi_sums, kZeroShift));
    }
    const __m256 dx = _mm256_set1_ps(p.d);
    if constexpr (kMin) {
      __m256 t = _mm256_mul_ps(dw_lo, _mm256_cvtepi32_ps(dot_lo));
      t = _mm256_fmadd_ps(dw_hi, _mm256_cvtepi32_ps(dot_hi), t);
      t = _mm256_fmadd_ps(mw_lo, _mm256_cvtepi32_ps(lo_sums), t);
      t = _mm256_fmadd_ps(mw_hi, _mm256_cvtepi32_ps(hi_sums), t);
      acc[i] = _mm256_fmadd_ps(t, dx, acc[i]);
    } else {
      acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(dw_lo, dx), _mm256_cvtepi32_ps(dot_lo), acc[i]);
      acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(dw_hi, dx), _mm256_cvtepi32_ps(dot_hi), acc[i]);
    }
  }
}

// The IQ4 levels (signed) in both 128-bit lanes, for vpshufb.
static inline __m256i iq4_levels() {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(lowbit::kIq4Values)));
}

// Two half words of nibbles (a: elements 0-7 low, 16-23 high; b: 8-15, 24-31) as the four half
// words of a block of 32, each nibble through the IQ4 levels.
static inline void iq4_words(__m256i a, __m256i b, __m256i levels, __m256i (&w)[4]) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  w[0] = _mm256_shuffle_epi8(levels, _mm256_and_si256(a, low4));
  w[1] = _mm256_shuffle_epi8(levels, _mm256_and_si256(b, low4));
  w[2] = _mm256_shuffle_epi8(levels, _mm256_and_si256(_mm256_srli_epi16(a, 4), low4));
  w[3] = _mm256_shuffle_epi8(levels, _mm256_and_si256(_mm256_srli_epi16(b, 4), low4));
}

// Q5's fifth bits for half a word: byte 8r' + b is 16 where bit b of mask byte r' (at p, one
// byte per row) is set, else 0.
static inline __m256i fifth_bits(const uint8_t* p) {
  int32_t bits;
  std::memcpy(&bits, p, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(bits), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2,
                                                2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                          _mm256_set1_epi8(16));
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

// The accumulators of a tile: [half][activation row].
template <int RX>
using Acc = __m256[2][RX];

// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: blocks of 32 (block_tile's formats). kMin: a minimum per
// block (Q4_1, Q5_1); kZeroShift: the unsigned formats' zero point 2^kZeroShift (Q4_0 8, Q5_0 16).
template <RowFormat F>
struct BlockFormat {
  static constexpr bool kBlocksOf32 = F == RowFormat::kQ8_0 || F == RowFormat::kQ4_0 ||
                                      F == RowFormat::kQ4_1 || F == RowFormat::kQ5_0 ||
                                      F == RowFormat::kQ5_1 || F == RowFormat::kIQ4_NL;
  static constexpr bool kSigned = F == RowFormat::kQ8_0 || F == RowFormat::kIQ4_NL;
  static constexpr bool kMin = F == RowFormat::kQ4_1 || F == RowFormat::kQ5_1;
  static constexpr bool kFifthBit = F == RowFormat::kQ5_0 || F == RowFormat::kQ5_1;
  static constexpr int kZeroShift = F == RowFormat::kQ4_0 ? 3 : F == RowFormat::kQ5_0 ? 4 : 0;
};

// The four words of half h (rows 4h..4h + 3) of a block: the signed formats' values as they are,
// the others' unsigned values.
template <RowFormat F>
static inline void block_words(const uint8_t* block, int h, __m256i (&u)[4]) {
  using Format = BlockFormat<F>;
  const uint8_t* qh = block + (Format::kMin ? 32 : 16);  // Q5 only
  const uint8_t* qs = qh + (Format::kFifthBit ? 32 : 0);
  if constexpr (F == RowFormat::kQ8_0) {
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) u[c] = half_word(qs, c, h);
  } else if constexpr (F == RowFormat::kIQ4_NL) {
    iq4_words(half_word(qs, 0, h), half_word(qs, 1, h), iq4_levels(), u);
  } else {
    // Word 0 holds elements 0-7 (low nibbles) and 16-23 (high), word 1 8-15 and 24-31.
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i a = half_word(qs, 0, h), b1 = half_word(qs, 1, h);
    u[0] = _mm256_and_si256(a, low4);
    u[1] = _mm256_and_si256(b1, low4);
    u[2] = _mm256_and_si256(_mm256_srli_epi16(a, 4), low4);
    u[3] = _mm256_and_si256(_mm256_srli_epi16(b1, 4), low4);
    if constexpr (Format::kFifthBit) {
      // Qh byte t of the 8 rows is the fifth-bit mask of word t's bytes.
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) u[t] = _mm256_or_si256(u[t], fifth_bits(qh + 8 * t + 4 * h));
    }
  }
}

// Half h of block b against RX activation rows:
template <RowFormat F, int RX>
static inline void block_half(const uint8_t* block, const PreparedBlock* xb, int64_t blocks, int h,
                              __m256 (&acc)[RX]) {
  using Format = BlockFormat<F>;
  const __m256 d = f16x8(block);
  const __m256 dw = row_pairs(d, h);
  __m256i u[4];
  block_words<F>(block, h, u);
  if constexpr (Format::kSigned) {
    accumulate_signed<RX>(u, dw, xb, blocks, acc);
  } else {
    const __m256 m = Format::kMin ? f16x8(block + 16) : d;
    accumulate<RX, Format::kZeroShift, Format::kMin>(u, dw, row_pairs(m, h), xb, blocks, acc);
  }
}

#if defined(LM_INT8_DPBUSD)
// accumulate for both halves of a group of 32 in one pass: each activation word is broadcast once
// for the group's 8 rows (vpdpbusd needs no int16 staging, so both halves' words fit the
// registers even VEX's 16). d and m: the 8 rows' scales and minimums, each half's rows taken by
// row_pairs. Per lane accumulate's operations, in its order.
template <int RX, int kZeroShift, bool kMin>
static inline void accumulate_both_halves(const __m256i (&u)[2][4], __m256 d, __m256 m,
                                          const PreparedBlock* xb, int64_t blocks, Acc<RX>& acc) {
  const __m256 dw[2] = {row_pairs(d, 0), row_pairs(d, 1)};
  const __m256 mw[2] = {row_pairs(m, 0), row_pairs(m, 1)};
#pragma GCC unroll 8
  for (int i = 0; i < RX; ++i) {
    const PreparedBlock& p = xb[i * blocks];
    const __m256i zero_point = kZeroShift > 0 ? _mm256_slli_epi32(broadcast8(p.neg_sum), kZeroShift)
                                              : _mm256_setzero_si256();
    __m256i dot[2] = {zero_point, zero_point};
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i q = broadcast8(p.q + 8 * c);
      dot[0] = dpbusd(dot[0], u[0][c], q);
      dot[1] = dpbusd(dot[1], u[1][c], q);
    }
    const __m256 dd = _mm256_set1_ps(p.d);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      acc[h][i] = _mm256_fmadd_ps(_mm256_mul_ps(dw[h], dd), _mm256_cvtepi32_ps(dot[h]), acc[h][i]);
      if constexpr (kMin)
        acc[h][i] = _mm256_fmadd_ps(mw[h], _mm256_castsi256_ps(broadcast8(p.dsum)), acc[h][i]);
    }
  }
}

// Both halves of a block against RX activation rows in one pass (one 4096 x 4096 Linear, 1
// thread, 512 rows, the EVEX build kept to 16 registers: Q4_0 96.5 -> 111.7, Q4_1 90 -> 93.7,
// Q8_0 91.4 -> 117.8 G multiply-adds/s over two passes). Per lane block_half's operations; the
// signed formats as accumulate_signed takes them (w + 128, the zero point 128).
template <RowFormat F, int RX>
static inline void block_both_halves(const uint8_t* block, const PreparedBlock* xb, int64_t blocks,
                                     Acc<RX>& acc) {
  using Format = BlockFormat<F>;
  __m256i u[2][4];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    block_words<F>(block, h, u[h]);
    if constexpr (Format::kSigned) signed_to_unsigned(u[h]);
  }
  const __m256 d = f16x8(block);
  const __m256 m = Format::kMin ? f16x8(block + 16) : d;
  accumulate_both_halves<RX, Format::kSigned ? kSignedZeroShift : Format::kZeroShift, Format::kMin>(
      u, d, m, xb, blocks, acc);
}
#endif

// Halves [kH0, kH1) of every block (group_tile chooses the passes).
template <RowFormat F, int RX, int kH0, int kH1>
void block_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, Acc<RX>& acc) {
#if defined(LM_INT8_DPBUSD)
  if constexpr (kH0 == 0 && kH1 == 2) {
    for (int64_t b = 0; b < blocks; ++b)
      block_both_halves<F, RX>(g + b * kGroupBlockBytes<F>, x + b, blocks, acc);
    return;
  }
#endif
  for (int64_t b = 0; b < blocks; ++b) {
    for (int h = kH0; h < kH1; ++h)
      block_half<F, RX>(g + b * kGroupBlockBytes<F>, x + b, blocks, h, acc[h]);
  }
}

// The 6-bit scales and minimums of 8 Q4_K / Q5_K rows from their 3 interleaved scale words at s
// (unpack_scales_k4, a row per 32-bit lane): byte t of sc_low / mn_low is group t's scale /
// minimum, of sc_high / mn_high group 4 + t's.
struct K4Scales {
  __m256i sc_low, mn_low, sc_high, mn_high;
};

static inline K4Scales k4_scales(const uint8_t* s) {
  const __m256i m3f = _mm256_set1_epi8(0x3f), m0f = _mm256_set1_epi8(0x0f);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const __m256i s0 = load256(s), s1 = load256(s + 32), s2 = load256(s + 64);
  return {
      _mm256_and_si256(s0, m3f), _mm256_and_si256(s1, m3f),
      _mm256_or_si256(_mm256_and_si256(s2, m0f), _mm256_and_si256(_mm256_srli_epi32(s0, 2), m30)),
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(s2, 4), m0f),
                      _mm256_and_si256(_mm256_srli_epi32(s1, 2), m30))};
}

// Byte t % 4 of each 32-bit lane of v as fp32 times f.
static inline __m256 scaled_byte(__m256i v, int t, __m256 f) {
  const __m256i bytes = _mm256_and_si256(_mm256_srli_epi32(v, static_cast<unsigned>(8 * (t % 4))),
                                         _mm256_set1_epi32(0xff));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(bytes), f);
}

// Group t's scales times d and minimums times -dmin, a row per lane.
static inline void k4_group_scales(const K4Scales& s, int t, __m256 d, __m256 neg_dmin, __m256& sc,
                                   __m256& mn) {
  sc = scaled_byte(t < 4 ? s.sc_low : s.sc_high, t, d);
  mn = scaled_byte(t < 4 ? s.mn_low : s.mn_high, t, neg_dmin);
}

// Group t's values for half h of a Q4_K / Q5_K (kFifthBit) super-block: the low (t even) or high
// nibbles of qs words 4(t / 2) + c, with Q5_K bit t of qh word c as the fifth bit.
template <bool kFifthBit>
static inline void k4_group_words(const uint8_t* qs_words, const uint8_t* qh_words, int t, int h,
                                  __m256i (&u)[4]) {
  const __m256i low4 = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    __m256i qs = half_word(qs_words, 4 * (t / 2) + c, h);
    if (t % 2) qs = _mm256_srli_epi16(qs, 4);
    u[c] = _mm256_and_si256(qs, low4);
    if constexpr (kFifthBit) {
      __m256i qh = half_word(qh_words, c, h);
      if (t < 4) qh = _mm256_slli_epi16(qh, 4 - t);
      if (t > 4) qh = _mm256_srli_epi16(qh, t - 4);
      u[c] = _mm256_or_si256(u[c], _mm256_and_si256(qh, bit4));
    }
  }
}

// Q4_K and Q5_K (kFifthBit): super-blocks of 256, 8 groups of 32 with 6-bit scales and minimums;
// Q5_K adds a fifth bit per value, bit t of qh byte l for element l of group t (the interleaved
// order is GGML's: d, dmin, scales, [qh words 0-3,] qs words 0-15).
template <int RX, bool kFifthBit, int kH0, int kH1>
void k4_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, Acc<RX>& acc) {
  constexpr int64_t kBytes = kRows * (kFifthBit ? kquant::kQ5_KBytes : kquant::kQ4_KBytes);
  constexpr int64_t kScales = kRows * 4, kQh = kScales + kRows * 12;
  constexpr int64_t kQs = kQh + (kFifthBit ? kRows * 32 : 0);
  for (int64_t sb = 0; sb < blocks / kquant::kGroups; ++sb) {
    const uint8_t* block = g + sb * kBytes;
    const __m256 d = f16x8(block);
    const __m256 neg_dmin = _mm256_sub_ps(_mm256_setzero_ps(), f16x8(block + 16));
    const K4Scales scales = k4_scales(block + kScales);
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      __m256 sc, mn;
      k4_group_scales(scales, t, d, neg_dmin, sc, mn);
      const PreparedBlock* xt = x + sb * kquant::kGroups + t;
#if defined(LM_INT8_DPBUSD)
      if constexpr (kH0 == 0 && kH1 == 2) {
        __m256i u[2][4];
        k4_group_words<kFifthBit>(block + kQs, block + kQh, t, 0, u[0]);
        k4_group_words<kFifthBit>(block + kQs, block + kQh, t, 1, u[1]);
        accumulate_both_halves<RX, 0, true>(u, sc, mn, xt, blocks, acc);
        continue;
      }
#endif
#pragma GCC unroll 2
      for (int h = kH0; h < kH1; ++h) {
        __m256i u[4];
        k4_group_words<kFifthBit>(block + kQs, block + kQh, t, h, u);
        accumulate<RX, 0, true>(u, row_pairs(sc, h), row_pairs(mn, h), xt, blocks, acc[h]);
      }
    }
  }
}

// Q6_K: super-blocks of 256 in two halves of 128; each group of 32 has two 16-element int8
// scales (words 0-1 and words 2-3), so a group is two int32 sums per lane.
template <int RX, int kH0, int kH1>
void q6_k_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, Acc<RX>& acc) {
  // The interleaved order (interleaved_rows.h): d, scale pairs, then per half ql words 0-3, qh
  // words 0-3 and ql words 4-7.
  constexpr int64_t kBytes = kRows * kquant::kQ6_KBytes;
  constexpr int64_t kScales = kRows * 2, kHalves = kScales + kRows * 16;
  constexpr int64_t kHalfBytes = kRows * 96, kQh = kRows * 32, kQlHigh = kRows * 64;
  const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
  const __m256i first = _mm256_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6);
  const __m256i second = _mm256_setr_epi32(1, 1, 3, 3, 5, 5, 7, 7);
  for (int64_t sb = 0; sb < blocks / kquant::kGroups; ++sb) {
    const uint8_t* block = g + sb * kBytes;
    const __m256 d = f16x8(block);
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        // Group 4 half + t (kquant::group_values_q6_k): low 4 bits from the low (t < 2) or high
        // nibbles of ql words 8 half + 4 (t % 2) + c, top 2 bits from bit pair t of qh word
        // 4 half + c.
        const uint8_t* words = block + kHalves + half * kHalfBytes;
        const uint8_t* pair_scales = block + kScales + 16 * (4 * half + t);
#pragma GCC unroll 2
        for (int h = kH0; h < kH1; ++h) {
          __m256i u[4];
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            __m256i ql = half_word(words + (t % 2 ? kQlHigh : 0), c, h);
            if (t >= 2) ql = _mm256_srli_epi16(ql, 4);
            __m256i qh = half_word(words + kQh, c, h);
            if (t < 2) qh = _mm256_slli_epi16(qh, 4 - 2 * t);
            if (t == 3) qh = _mm256_srli_epi16(qh, 2);
            u[c] = _mm256_or_si256(_mm256_and_si256(ql, low4), _mm256_and_si256(qh, bits45));
          }
          // Rows 4h..4h+3's two scales (lane 2r' and 2r' + 1) times the row's d.
          const __m256 scales = _mm256_mul_ps(
              _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                  _mm_loadl_epi64(reinterpret_cast<const __m128i*>(pair_scales + 8 * h)))),
              row_pairs(d, h));
          const __m256 dw_lo = _mm256_permutevar8x32_ps(scales, first);
          const __m256 dw_hi = _mm256_permutevar8x32_ps(scales, second);
          // Zero point 32.
          accumulate_halves<RX, 5, false>(u, dw_lo, dw_hi, dw_lo, dw_hi,
                                          x + sb * kquant::kGroups + 4 * half + t, blocks, acc[h]);
        }
      }
    }
  }
}

// IQ4_XS: super-blocks of 256, 8 groups of 32 with a 6-bit scale each (minus 32) and IQ4_NL's
// nibbles.
template <int RX, int kH0, int kH1>
void iq4_xs_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, Acc<RX>& acc) {
  constexpr int64_t kBytes = kRows * lowbit::kIQ4_XSBytes;
  constexpr int64_t kScalesH = kRows * 2, kScalesL = kRows * 4, kQs = kRows * 8;
  const __m256i levels = iq4_levels();
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
      // Group t is qs words 2t and 2t + 1.
#if defined(LM_INT8_DPBUSD)
      if constexpr (kH0 == 0 && kH1 == 2) {  // both halves in one pass, as accumulate_signed
        __m256i u[2][4];
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          iq4_words(half_word(block + kQs, 2 * t, h), half_word(block + kQs, 2 * t + 1, h), levels,
                    u[h]);
          signed_to_unsigned(u[h]);
        }
        accumulate_both_halves<RX, kSignedZeroShift, false>(u, scaled, scaled, x + sb * 8 + t,
                                                            blocks, acc);
        continue;
      }
#endif
#pragma GCC unroll 2
      for (int h = kH0; h < kH1; ++h) {
        __m256i w[4];
        iq4_words(half_word(block + kQs, 2 * t, h), half_word(block + kQs, 2 * t + 1, h), levels,
                  w);
        accumulate_signed<RX>(w, row_pairs(scaled, h), x + sb * 8 + t, blocks, acc[h]);
      }
    }
  }
}

// Q3_K: super-blocks of 256, 8 groups of 32 of 3-bit values (zero point 4) with a 6-bit scale
// (minus 32) per 16.
template <int RX, int kH0, int kH1>
void q3_k_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, Acc<RX>& acc) {
  constexpr int64_t kBytes = kRows * lowbit::kQ3_KBytes;
  constexpr int64_t kScales = kRows * 2, kHmask = kScales + kRows * 12, kQs = kHmask + kRows * 32;
  const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
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
    // Scale s of the 8 rows times d, a row per lane.
    const auto scale = [&](int s) {
      const __m256i v = _mm256_and_si256(_mm256_srli_epi32(sc[s / 4], 8 * (s % 4)), byte);
      return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, thirty_two)), d);
    };
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      const __m256 s_lo = scale(2 * t), s_hi = scale(2 * t + 1);
#pragma GCC unroll 2
      for (int h = kH0; h < kH1; ++h) {
        // Group t (lowbit::decode_group): bits 2(t % 4), +1 of qs words 4(t / 4) + c, and bit t
        // of hmask word c as the third bit.
        __m256i u[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const __m256i qs = _mm256_srli_epi16(half_word(block + kQs, 4 * (t / 4) + c, h),
                                               static_cast<unsigned>(2 * (t % 4)));
          __m256i hm = half_word(block + kHmask, c, h);
          if (t < 2) hm = _mm256_slli_epi16(hm, static_cast<unsigned>(2 - t));
          if (t > 2) hm = _mm256_srli_epi16(hm, static_cast<unsigned>(t - 2));
          u[c] = _mm256_or_si256(_mm256_and_si256(qs, three), _mm256_and_si256(hm, four));
        }
        const __m256 dw_lo = row_pairs(s_lo, h), dw_hi = row_pairs(s_hi, h);
        accumulate_halves<RX, 2, false>(u, dw_lo, dw_hi, dw_lo, dw_hi, x + sb * 8 + t, blocks,
                                        acc[h]);
      }
    }
  }
}

// Q2_K: super-blocks of 256, 8 groups of 32 of 2-bit values with a 4-bit scale and minimum per
// 16.
template <int RX, int kH0, int kH1>
void q2_k_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, Acc<RX>& acc) {
  constexpr int64_t kBytes = kRows * lowbit::kQ2_KBytes;
  constexpr int64_t kScales = kRows * 4, kQs = kScales + kRows * 16;
  const __m256i three = _mm256_set1_epi8(3), low4 = _mm256_set1_epi32(0x0f);
  const __m256i first = _mm256_setr_epi32(0, 0, 2, 2, 4, 4, 6, 6);
  const __m256i second = _mm256_setr_epi32(1, 1, 3, 3, 5, 5, 7, 7);
  for (int64_t sb = 0; sb < blocks / 8; ++sb) {
    const uint8_t* block = g + sb * kBytes;
    const __m256 d = f16x8(block), dmin = f16x8(block + kRows * 2);
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
#pragma GCC unroll 2
      for (int h = kH0; h < kH1; ++h) {
        // Group t's scale/min bytes of rows 4h..4h+3: lane 2r' the first half's, 2r' + 1 the
        // second's.
        const __m256i bytes = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + kScales + 16 * t + 8 * h)));
        const __m256 sc =
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(bytes, low4)), row_pairs(d, h));
        const __m256 mn =
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(bytes, 4)), row_pairs(dmin, h));
        // Bits 2(t % 4), +1 of qs words 4(t / 4) + c.
        __m256i u[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          u[c] = _mm256_and_si256(_mm256_srli_epi16(half_word(block + kQs, 4 * (t / 4) + c, h),
                                                    static_cast<unsigned>(2 * (t % 4))),
                                  three);
        }
        accumulate_halves<RX, 0, true>(
            u, _mm256_permutevar8x32_ps(sc, first), _mm256_permutevar8x32_ps(sc, second),
            _mm256_permutevar8x32_ps(mn, first), _mm256_permutevar8x32_ps(mn, second),
            x + sb * 8 + t, blocks, acc[h]);
      }
    }
  }
}

// Q4_Z128: blocks of 128 with one scale d and zero point z per row, in the VNNI kernel's
// operations and order (int8_interleaved_vnni.cc): per activation row, t = the sub-blocks'
// activation-scaled sums, acc += d * t, then acc += -(d * z) * dsum4 in each row's even lane.
// Half h (rows 4h..4h + 3) of block sb:
template <int RX>
static inline void q4_z128_half(const uint8_t* block, const PreparedBlock* xb, int64_t blocks,
                                int h, __m256 (&acc)[RX]) {
  constexpr int64_t kZ = kRows * 2, kQs = kRows * 4;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256 d = f16x8(block);
  const __m256 z = _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + kZ))));
  const __m256 m = _mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), d), z);
  const uint8_t* qs = block + kQs;
  __m256 t[RX];
#pragma GCC unroll 4
  for (int j = 0; j < q4z::kSubBlocks; ++j) {
    const __m256i a = half_word(qs + 128 * j, 0, h), b1 = half_word(qs + 128 * j, 1, h);
    __m256i u[4];
    u[0] = _mm256_and_si256(a, low4);
    u[1] = _mm256_and_si256(b1, low4);
    u[2] = _mm256_and_si256(_mm256_srli_epi16(a, 4), low4);
    u[3] = _mm256_and_si256(_mm256_srli_epi16(b1, 4), low4);
#pragma GCC unroll 8
    for (int i = 0; i < RX; ++i) {
      const PreparedBlock& p = xb[i * blocks + j];
      const __m256 dot = _mm256_cvtepi32_ps(dot4_unsigned(u, p.q, _mm256_setzero_si256()));
      t[i] = j == 0 ? _mm256_mul_ps(_mm256_set1_ps(p.d), dot)
                    : _mm256_fmadd_ps(_mm256_set1_ps(p.d), dot, t[i]);
    }
  }
  const __m256 dw = row_pairs(d, h), mw = row_pairs(m, h);
#pragma GCC unroll 8
  for (int i = 0; i < RX; ++i) {
    const __m256 dsum4 =
        _mm256_blend_ps(_mm256_set1_ps(xb[i * blocks].dsum4), _mm256_setzero_ps(), 0xaa);
    acc[i] = _mm256_fmadd_ps(mw, dsum4, _mm256_fmadd_ps(dw, t[i], acc[i]));
  }
}

// Halves [kH0, kH1) of every block (group_tile chooses the passes).
template <int RX, int kH0, int kH1>
void q4_z128_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, Acc<RX>& acc) {
  constexpr int64_t kBytes = kRows * q4z::kBytes;
  for (int64_t sb = 0; sb < blocks / q4z::kSubBlocks; ++sb) {
    for (int h = kH0; h < kH1; ++h)
      q4_z128_half<RX>(g + sb * kBytes, x + sb * q4z::kSubBlocks, blocks, h, acc[h]);
  }
}

// Halves [kH0, kH1) (rows 4h..4h + 3) of 8 weight rows against RX activation rows.
template <RowFormat F, int RX, int kH0, int kH1>
void halves_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, Acc<RX>& acc) {
  if constexpr (F == RowFormat::kQ4_K) {
    k4_tile<RX, false, kH0, kH1>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kQ5_K) {
    k4_tile<RX, true, kH0, kH1>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kQ6_K) {
    q6_k_tile<RX, kH0, kH1>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kIQ4_XS) {
    iq4_xs_tile<RX, kH0, kH1>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kQ3_K) {
    q3_k_tile<RX, kH0, kH1>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kQ2_K) {
    q2_k_tile<RX, kH0, kH1>(g, x, blocks, acc);
  } else if constexpr (F == RowFormat::kQ4_Z128) {
    q4_z128_tile<RX, kH0, kH1>(g, x, blocks, acc);
  } else {
    block_tile<F, RX, kH0, kH1>(g, x, blocks, acc);
  }
}

// Whether prefill tiles take both halves of F's blocks in one pass: at the avx-vnni level the
// blocks of 32 (block_both_halves), Q4_K, Q5_K and IQ4_XS (a group of 32 with one scale: one
// 4096 x 4096 Linear, 1 thread, the EVEX build kept to VEX's 16 registers, G multiply-adds/s
// two-pass -> one-pass at 512 / 5 / 1 rows: Q4_K 78 -> 79 / 85 -> 89 / 47 -> 56, Q5_K 65 -> 63 /
// 71 -> 77 / 26 -> 33, IQ4_XS 77 -> 86 / 83 -> 93 / 46 -> 46; the one-row tile took the halves
// one after the other before).
#if defined(LM_INT8_DPBUSD)
template <RowFormat F>
constexpr bool kOnePass = BlockFormat<F>::kBlocksOf32 || F == RowFormat::kQ4_K ||
                          F == RowFormat::kQ5_K || F == RowFormat::kIQ4_XS;
#else
template <RowFormat F>
constexpr bool kOnePass = false;
#endif

// 8 weight rows (group g) against RX activation rows. AVX2's prefill tiles (RX > 1) take the two
// halves in one pass each over the group's blocks (the second from L1/L2), so only one half's
// accumulators are live: with both, a tile's accumulators, words and scales overflowed AVX2's 16
// registers and spilled (512-token prefill 1.14-1.24x faster split, a format's per-block scales
// decoded once per pass). Decode (one row) has the registers and streams the weights once, and so
// do the avx-vnni level's tiles of kOnePass formats. Each lane's operations are the same either
// way.
template <RowFormat F, int RX>
void group_tile(const uint8_t* g, const PreparedBlock* x, int64_t blocks, float* y, int64_t ldy) {
  Acc<RX> acc;
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < RX; ++i) acc[h][i] = _mm256_setzero_ps();
  }
  if constexpr (RX == 1 || kOnePass<F>) {
    halves_tile<F, RX, 0, 2>(g, x, blocks, acc);
  } else {
    halves_tile<F, RX, 0, 1>(g, x, blocks, acc);
    halves_tile<F, RX, 1, 2>(g, x, blocks, acc);
  }
  // hadd gives rows 0, 1, 4, 5, 2, 3, 6, 7 (each lane 2r' + lane 2r' + 1, as the VNNI kernel adds
  // them); the permutation puts them in order.
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  for (int i = 0; i < RX; ++i) {
    _mm256_storeu_ps(y + i * ldy,
                     _mm256_permutevar8x32_ps(_mm256_hadd_ps(acc[0][i], acc[1][i]), order));
  }
}

// Every group against all m activation rows, 4 at a time and the rest in one tile of 1, 2 or 3,
// or 5 (a speculative verify step's 2-5 rows: the decode tile, which streams both halves at once,
// after a tile of 2 or 4 cost about as much again as its row did in the wider tile; one thread,
// weights in L2: 3 rows 6.7 -> 5.5 ms, 5 rows 9.6 -> 8.4). A 4-row tile's pass over one half
// keeps 4 accumulators, leaving AVX2's 16 registers room for the words and constants.
template <RowFormat F>
void gemm(const uint8_t* w, int64_t n, const PreparedBlock* x, int64_t m, int64_t k, float* y,
          int64_t ldy) {
  const int64_t blocks = k / 32;
  const int64_t group_bytes = kRows * row_bytes(F, k);
  for (int64_t g = 0; g < n / kRows; ++g) {
    const uint8_t* wg = w + g * group_bytes;
    float* yg = y + g * kRows;
    int64_t i = 0;
    for (; i + 4 <= m && m - i != 5; i += 4)
      group_tile<F, 4>(wg, x + i * blocks, blocks, yg + i * ldy, ldy);
    if (i < m) {
      with_row_count<5>(
          m - i, [&]<int R>() { group_tile<F, R>(wg, x + i * blocks, blocks, yg + i * ldy, ldy); });
    }
  }
}

}  // namespace

#if !defined(LM_INT8_DPBUSD)  // one preparation serves every level
void int8_interleaved_prepare_avx2(const BlockQ8Act* xq, int64_t xq_stride, int64_t m, int64_t k,
                                   void* dst) {
  const int64_t blocks = k / 32;
  auto* out = static_cast<PreparedBlock*>(dst);
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const BlockQ8Act& a = xq[i * xq_stride + b];
      PreparedBlock& p = out[i * blocks + b];
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
      _mm256_store_si256(reinterpret_cast<__m256i*>(p.q), q);
      // Lane l of sums4: the sum of bytes 4l..4l+3 (the VNNI preparation's values); adding lane
      // l + 2 gives, in lanes 0 and 1 of each 128-bit half, the two lane halves' sums over words
      // 0-1 (low half) and 2-3 (high).
      const __m256i sums4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
      const __m256i pairs = _mm256_add_epi32(sums4, _mm256_shuffle_epi32(sums4, 0x4e));
      const __m128i lo = _mm256_castsi256_si128(pairs);
      const __m128i all = _mm_add_epi32(lo, _mm256_extracti128_si256(pairs, 1));
      p.d = a.d;
      _mm_storel_epi64(reinterpret_cast<__m128i*>(p.neg_sum),
                       _mm_sub_epi32(_mm_setzero_si128(), all));
      _mm_storel_pi(reinterpret_cast<__m64*>(p.dsum),
                    _mm_mul_ps(_mm_set1_ps(a.d), _mm_cvtepi32_ps(all)));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(p.neg_sum_lo),
                       _mm_sub_epi32(_mm_setzero_si128(), lo));
      p.dsum4 = 0.0f;
      if (b % 4 == 0 && b + 4 <= blocks) {
        const BlockQ8Act* a4 = xq + i * xq_stride + b;
        p.dsum4 = ((a4[0].s + a4[1].s) + a4[2].s) + a4[3].s;
      }
    }
  }
}

#endif

void LM_INT8_INTERLEAVED_GEMM(RowFormat format, const void* w, int64_t n, const void* x, int64_t m,
                              int64_t k, float* y, int64_t ldy) {
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

#else  // No AVX2 in this build (nor the avx-vnni builds): the tables never point here.

namespace lm::kernels {
void int8_interleaved_prepare_avx2(const BlockQ8Act*, int64_t, int64_t, int64_t, void*) {}
void int8_interleaved_gemm_avx2(RowFormat, const void*, int64_t, const void*, int64_t, int64_t,
                                float*, int64_t) {}
void int8_interleaved_gemm_avx_vnni(RowFormat, const void*, int64_t, const void*, int64_t, int64_t,
                                    float*, int64_t) {}
void int8_interleaved_gemm_avx_vnni_evex(RowFormat, const void*, int64_t, const void*, int64_t,
                                         int64_t, float*, int64_t) {}
}  // namespace lm::kernels

#endif
