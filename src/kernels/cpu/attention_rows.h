// The attention inner loop every ISA table provides (IsaKernels::attend_rows): up to
// kAttentionMaxRows query rows that read the same K/V rows (one sequence, one KV head: the heads
// of a GQA group and the tokens of a prefill chunk) attend together, one row per vector lane. Each
// K row is loaded once for all rows (scores = FMAs of transposed Q against broadcast K elements)
// and each V row once (acc^T += weights x broadcast V elements), with flash-attention's online
// softmax in tiles of kAttentionPositionTile positions and a vectorised exp.
//
// Lanes never interact: a row's result is the same bits whichever rows share its call and
// whichever vector width runs it (every width executes the same operations per lane), so
// attention stays batch-invariant. Groups of up to 8 rows (decode) may instead put positions in
// lanes (attend_keys_in_lanes): the same operations per (row, position) in the same order, so
// the same bits again. Rows may see different numbers of positions (causal prefill):
// positions past a row's own are masked out of its max, weights and sums.
// The template is instantiated with a lane_math.h policy only in files built for one ISA
// (lanes/lane_kernels.cc, kernels_avx2.cc, kernels_scalar.cc); it is `static` for the reason
// kernels_avx2.cc gives.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/kv_format.h"
#include "kernels/cpu/lane_math.h"
#include "kernels/cpu/row_count_dispatch.h"

namespace lm::kernels {

// Positions scored per tile: their weights stay in L1 next to the rows' accumulators.
inline constexpr int64_t kAttentionPositionTile = 64;
// Query rows per attend_rows call: one per lane of two 512-bit registers (attend's groups).
inline constexpr int64_t kAttentionMaxRows = 32;
// Query rows per attend_rows_kv call (positions in lanes: one score register per row).
inline constexpr int64_t kAttentionInPlaceMaxRows = 8;
// Query rows per attend_scores / attend_values call (the split decode pair).
inline constexpr int64_t kAttentionSplitMaxRows = 4;

}  // namespace lm::kernels

namespace lm::kernels::attention_rows {

// Floats of scratch attend_rows needs for head_dim.
inline int64_t scratch_floats(int64_t head_dim) {
  return (2 * head_dim + kAttentionPositionTile) * kAttentionMaxRows;
}

// cap * tanh(s / cap) per lane (Gemma 2's attention soft-capping), with tanh(y) = sign(y) *
// (1 - e) / (1 + e), e = exp(-2|y|) from the polynomial exp: no overflow for any score.
template <typename V>
static typename V::Reg softcapped(typename V::Reg s, float cap) {
  using Reg = typename V::Reg;
  const Reg y = V::div(s, V::set1(cap));
  const Reg abs_y = V::max(y, V::sub(V::zero(), y));
  const Reg e = lanes::exp_nonpositive<V>(V::mul(V::set1(-2.0f), abs_y));
  const Reg t = V::div(V::sub(V::set1(1.0f), e), V::add(V::set1(1.0f), e));
  return V::mul(V::select(V::less(y, V::zero()), V::sub(V::zero(), t), t), V::set1(cap));
}

// The dot products of a tile's positions with every row of the G groups (q_t: [G][head_dim][L]),
// each one FMA chain over d from zero, to raw[(j * G + g) * L]: four positions at a time (four
// independent chains per group). Not inlined into attend: there GCC kept the softmax's state and
// hoisted exp constants in registers through this loop and spilled the broadcasts or the
// accumulators of its hottest loop to the stack (SmolLM2 BF16 512-token prefill at avx512-bf16:
// attention 20% of cycles).
template <typename V, int G>
__attribute__((noinline)) static void raw_scores(const float* q_t, int64_t head_dim, const float* k,
                                                 const int64_t* offsets, int64_t tile, float* raw) {
  using Reg = typename V::Reg;
  constexpr int L = V::kLanes;
  int64_t j = 0;
  for (; j + 4 <= tile; j += 4) {
    const float* k0 = k + offsets[j];
    const float* k1 = k + offsets[j + 1];
    const float* k2 = k + offsets[j + 2];
    const float* k3 = k + offsets[j + 3];
    Reg s0[G], s1[G], s2[G], s3[G];
    for (int g = 0; g < G; ++g) s0[g] = s1[g] = s2[g] = s3[g] = V::zero();
    for (int64_t d = 0; d < head_dim; ++d) {
      const Reg b0 = V::set1(k0[d]), b1 = V::set1(k1[d]), b2 = V::set1(k2[d]), b3 = V::set1(k3[d]);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        const Reg qd = V::load(q_t + (g * head_dim + d) * L);
        s0[g] = V::fmadd(qd, b0, s0[g]);
        s1[g] = V::fmadd(qd, b1, s1[g]);
        s2[g] = V::fmadd(qd, b2, s2[g]);
        s3[g] = V::fmadd(qd, b3, s3[g]);
      }
    }
    for (int g = 0; g < G; ++g) {
      V::store(raw + (j * G + g) * L, s0[g]);
      V::store(raw + ((j + 1) * G + g) * L, s1[g]);
      V::store(raw + ((j + 2) * G + g) * L, s2[g]);
      V::store(raw + ((j + 3) * G + g) * L, s3[g]);
    }
  }
  for (; j < tile; ++j) {
    const float* kj = k + offsets[j];
    Reg s[G];
    for (int g = 0; g < G; ++g) s[g] = V::zero();
    for (int64_t d = 0; d < head_dim; ++d) {
      const Reg b = V::set1(kj[d]);
      for (int g = 0; g < G; ++g) s[g] = V::fmadd(V::load(q_t + (g * head_dim + d) * L), b, s[g]);
    }
    for (int g = 0; g < G; ++g) V::store(raw + (j * G + g) * L, s[g]);
  }
}

// num_rows <= kGroups * V::kLanes rows; row r attends to positions [0, num_positions[r]) at
// k + offsets[p] and v + offsets[p]. scratch: scratch_floats(head_dim) floats. out_rows may alias
// q_rows. kSoftcap: scores (after scale) become softcap * tanh(score / softcap) before the
// softmax. kGroups groups of V::kLanes rows share each pass over the positions: every K and V
// element loaded serves them all (a prefill chunk's rows re-read the cache kGroups times less);
// a lane's operations are the same whatever the group count, so the same bits.
template <typename V, bool kSoftcap = false, int kGroups = 1>
static void attend(const float* const* q_rows, float* const* out_rows, const int64_t* num_positions,
                   int64_t num_rows, const float* k, const float* v, const int64_t* offsets,
                   int64_t head_dim, float scale, float* scratch, float softcap = 0.0f) {
  using Reg = typename V::Reg;
  constexpr int L = V::kLanes;
  constexpr int G = kGroups;
  static_assert(G * L <= kAttentionMaxRows);
  float* q_t = scratch;                       // [G][head_dim][L]
  float* acc_t = q_t + G * head_dim * L;      // [G][head_dim][L], unnormalised sum of w * v
  float* weights = acc_t + G * head_dim * L;  // [kAttentionPositionTile][G][L]
  float limits[G * L];
  int64_t max_positions = 0;
  for (int r = 0; r < G * L; ++r) {
    const bool used = r < num_rows;
    limits[r] = used ? static_cast<float>(num_positions[r]) : 0.0f;
    if (used) max_positions = std::max(max_positions, num_positions[r]);
    float* q_group = q_t + (r / L) * head_dim * L;
    for (int64_t d = 0; d < head_dim; ++d) q_group[d * L + r % L] = used ? q_rows[r][d] : 0.0f;
  }
  for (int64_t i = 0; i < G * head_dim * L; ++i) acc_t[i] = 0.0f;
  const Reg minus_inf = V::set1(-std::numeric_limits<float>::infinity());
  const Reg scale_v = V::set1(scale);
  Reg limit[G], running_max[G], denominator[G];
  for (int g = 0; g < G; ++g) {
    limit[g] = V::load(limits + g * L);
    running_max[g] = minus_inf;
    denominator[g] = V::zero();
  }

  for (int64_t p0 = 0; p0 < max_positions; p0 += kAttentionPositionTile) {
    const int64_t tile = std::min(kAttentionPositionTile, max_positions - p0);
    // Scores (raw_scores), then scaled, masked and their maxima taken.
    Reg tile_max[G];
    for (int g = 0; g < G; ++g) tile_max[g] = minus_inf;
    const auto finish_score = [&](Reg s, int64_t j, int g) {
      const auto valid = V::less(V::set1(static_cast<float>(p0 + j)), limit[g]);
      if constexpr (kSoftcap) {
        s = V::select(valid, softcapped<V>(V::mul(s, scale_v), softcap), minus_inf);
      } else {
        s = V::select(valid, V::mul(s, scale_v), minus_inf);
      }
      V::store(weights + (j * G + g) * L, s);
      tile_max[g] = V::max(tile_max[g], s);
    };
    raw_scores<V, G>(q_t, head_dim, k, offsets + p0, tile, weights);
    for (int64_t j = 0; j < tile; ++j) {
      for (int g = 0; g < G; ++g) finish_score(V::load(weights + (j * G + g) * L), j, g);
    }
    // Rescale what came before when a row's max grew (exp(-inf) on a row's first tile: its sums
    // are still zero); rows whose max did not grow multiply by exactly 1.
    for (int g = 0; g < G; ++g) {
      const auto grew = V::less(running_max[g], tile_max[g]);
      const Reg correction = V::select(
          grew, lanes::exp_nonpositive<V>(V::sub(running_max[g], tile_max[g])), V::set1(1.0f));
      running_max[g] = V::max(running_max[g], tile_max[g]);
      float* acc_g = acc_t + g * head_dim * L;
      for (int64_t d = 0; d < head_dim; ++d)
        V::store(acc_g + d * L, V::mul(V::load(acc_g + d * L), correction));
      denominator[g] = V::mul(denominator[g], correction);
      for (int64_t j = 0; j < tile; ++j) {
        const auto valid = V::less(V::set1(static_cast<float>(p0 + j)), limit[g]);
        float* w_slot = weights + (j * G + g) * L;
        const Reg w = V::select(
            valid, lanes::exp_nonpositive<V>(V::sub(V::load(w_slot), running_max[g])), V::zero());
        V::store(w_slot, w);
        denominator[g] = V::add(denominator[g], w);
      }
    }
    // acc^T += w x V, kDims head dimensions of every group in registers at a time (16 vector
    // accumulators at most: what an AVX2 register file holds beside the weights).
    constexpr int kDims = 8 / G > 0 ? 8 / G : 1;
    int64_t d0 = 0;
    for (; d0 + kDims <= head_dim; d0 += kDims) {
      Reg a[G][kDims];
      for (int g = 0; g < G; ++g) {
#pragma GCC unroll 8
        for (int t = 0; t < kDims; ++t) a[g][t] = V::load(acc_t + (g * head_dim + d0 + t) * L);
      }
      for (int64_t j = 0; j < tile; ++j) {
        Reg w[G];
        for (int g = 0; g < G; ++g) w[g] = V::load(weights + (j * G + g) * L);
        const float* vj = v + offsets[p0 + j] + d0;
#pragma GCC unroll 8
        for (int t = 0; t < kDims; ++t) {
          const Reg b = V::set1(vj[t]);
          for (int g = 0; g < G; ++g) a[g][t] = V::fmadd(w[g], b, a[g][t]);
        }
      }
      for (int g = 0; g < G; ++g) {
#pragma GCC unroll 8
        for (int t = 0; t < kDims; ++t) V::store(acc_t + (g * head_dim + d0 + t) * L, a[g][t]);
      }
    }
    for (; d0 < head_dim; ++d0) {
      for (int g = 0; g < G; ++g) {
        Reg a = V::load(acc_t + (g * head_dim + d0) * L);
        for (int64_t j = 0; j < tile; ++j)
          a = V::fmadd(V::load(weights + (j * G + g) * L), V::set1(v[offsets[p0 + j] + d0]), a);
        V::store(acc_t + (g * head_dim + d0) * L, a);
      }
    }
  }
  float inv[G * L];
  for (int g = 0; g < G; ++g) V::store(inv + g * L, V::div(V::set1(1.0f), denominator[g]));
  for (int r = 0; r < num_rows; ++r) {
    const float* acc_r = acc_t + (r / L) * head_dim * L + r % L;
    for (int64_t d = 0; d < head_dim; ++d) out_rows[r][d] = acc_r[d * L] * inv[r];
  }
}

#if defined(__AVX2__) && defined(__FMA__)
// In place: r[i] becomes element i of each of the 8 input rows.
static inline void transpose8(__m256 (&r)[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 8
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}

// How the decode kernels below load 8 consecutive K/V elements of a cache as fp32: one policy per
// KvFormat (kv_format.h), each giving exactly the values decode_kv_row gives, so a kernel reading
// the cache in place computes what it computes on decoded fp32 rows, the same bits.
struct F32Elements {
  using T = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
};
struct F16Elements {
  using T = uint16_t;
  static __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct BF16Elements {
  using T = uint16_t;
  static __m256 load8(const uint16_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
};
// E4M3 is fp16 with 4 exponent bits, bias 7 and the low 7 mantissa bits dropped: its bits moved
// into fp16's places give the value / 2^8 (subnormals included), so a multiply by 256 (exact)
// restores it; S.1111.111, its NaN, is made fp16's NaN.
struct E4M3Elements {
  using T = uint8_t;
  static __m256 load8(const uint8_t* p) {
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m128i magnitude = _mm_and_si128(b, _mm_set1_epi16(0x7f));
    __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8),
                             _mm_slli_epi16(magnitude, 7));
    const __m128i nan = _mm_cmpeq_epi16(magnitude, _mm_set1_epi16(0x7f));
    h = _mm_or_si128(h, _mm_and_si128(nan, _mm_set1_epi16(0x7c00)));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
  }
};
// E5M2 is the high byte of an fp16.
struct E5M2Elements {
  using T = uint8_t;
  static __m256 load8(const uint8_t* p) {
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_cvtph_ps(_mm_slli_epi16(b, 8));
  }
};

// f.template operator()<E>() with E the policy of `format`.
template <typename F>
static void with_elements(KvFormat format, const F& f) {
  switch (format) {
    case KvFormat::kF32:
      return f.template operator()<F32Elements>();
    case KvFormat::kF16:
      return f.template operator()<F16Elements>();
    case KvFormat::kBF16:
      return f.template operator()<BF16Elements>();
    case KvFormat::kF8E4M3:
      return f.template operator()<E4M3Elements>();
    case KvFormat::kF8E5M2:
      return f.template operator()<E5M2Elements>();
  }
}

// R rows' online-softmax step over a tile of positions-in-lanes kernels (attend_keys_in_lanes,
// values_in_lanes). Row r: the tile's max from its scaled scores sc[r * sc_stride + j], j <
// tile, the correction of what came before (acc dims [d_begin, d_end) of row r and its
// denominator), then the weights w[r * w_stride + j] = exp(score - max) for the positions it sees
// in the tile (num_positions[r] - p0 of them) and 0 after, added to the denominator in order. sc
// may be w. Each row's maximum and sum are one chain over j, the R rows' chains interleaved (a
// row's chain is latency-bound, and one row at a time they left the core idle).
template <int R>
static inline void softmax_tile(const float* sc, int64_t sc_stride, float* w, int64_t w_stride,
                                int64_t p0, int64_t tile, const int64_t* num_positions,
                                float* running_max, float* denominator, float* acc,
                                int64_t acc_stride, int64_t d_begin, int64_t d_end) {
  using Y = lanes::Ymm;
  using S = lanes::Scalar;
  const __m256 lane_index = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  float tile_max[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) tile_max[r] = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < tile; ++j) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) tile_max[r] = S::max(tile_max[r], sc[r * sc_stride + j]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    // Positions of this tile the row sees (num_positions[r] > p0 is not guaranteed: rows of a
    // causal chunk end at different positions).
    const int64_t seen = num_positions[r] - p0;
    const int64_t valid_here = seen < 0 ? 0 : seen > tile ? tile : seen;
    const float correction = running_max[r] < tile_max[r]
                                 ? lanes::exp_nonpositive<S>(running_max[r] - tile_max[r])
                                 : 1.0f;
    running_max[r] = S::max(running_max[r], tile_max[r]);
    float* acc_r = acc + r * acc_stride;
    for (int64_t d = d_begin; d < d_end; d += 8)
      Y::store(acc_r + d, Y::mul(Y::load(acc_r + d), Y::set1(correction)));
    denominator[r] *= correction;
    for (int64_t j0 = 0; j0 < tile; j0 += 8) {
      const auto valid = Y::less(Y::add(Y::set1(static_cast<float>(j0)), lane_index),
                                 Y::set1(static_cast<float>(valid_here)));
      const __m256 e = lanes::exp_nonpositive<Y>(
          Y::sub(Y::load(sc + r * sc_stride + j0), Y::set1(running_max[r])));
      Y::store(w + r * w_stride + j0, Y::select(valid, e, Y::zero()));
    }
  }
  for (int64_t j = 0; j < tile; ++j) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) denominator[r] += w[r * w_stride + j];
  }
}

// Requests into L2 the floats [d_begin, d_end) of the rows of positions [j_begin, j_end) at
// base + offsets[j]: a KV head's rows are one cache slot apart, too scattered for the hardware
// prefetchers. (Into L1 the requests stalled on its few fill buffers.)
template <typename T>
static inline void request_rows(const T* base, const int64_t* offsets, int64_t j_begin,
                                int64_t j_end, int64_t d_begin, int64_t d_end) {
  constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(T));  // elements per cache line
  for (int64_t j = j_begin; j < j_end; ++j) {
    for (int64_t d = d_begin; d < d_end; d += kLine)
      _mm_prefetch(reinterpret_cast<const char*>(base + offsets[j] + d), _MM_HINT_T1);
  }
}

// acc[r * head_dim + d] += weights[r * kTile + j] x V row (p0 + j)[d] for the positions j <
// tile in order, dims [d0, d0 + 8 * DD), rows r < R (the V pass of the positions-in-lanes
// kernels): one FMA chain per (row, dim), the DD x R chains interleaved (one block's R chains
// left the FMA units waiting on their latency).
template <int R, int DD, typename E>
static inline void accumulate_values(float* acc, int64_t head_dim, const float* weights,
                                     const typename E::T* v, const int64_t* offsets, int64_t p0,
                                     int64_t tile, int64_t d0) {
  using Y = lanes::Ymm;
  constexpr int64_t kTile = kAttentionPositionTile;
  __m256 a[DD][R];
#pragma GCC unroll 8
  for (int b = 0; b < DD; ++b) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) a[b][r] = Y::load(acc + r * head_dim + d0 + 8 * b);
  }
  for (int64_t j = 0; j < tile; ++j) {
    const typename E::T* vj = v + offsets[p0 + j] + d0;
    __m256 w[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = Y::set1(weights[r * kTile + j]);
#pragma GCC unroll 8
    for (int b = 0; b < DD; ++b) {
      const __m256 vb = E::load8(vj + 8 * b);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) a[b][r] = Y::fmadd(w[r], vb, a[b][r]);
    }
  }
#pragma GCC unroll 8
  for (int b = 0; b < DD; ++b) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) Y::store(acc + r * head_dim + d0 + 8 * b, a[b][r]);
  }
}

// Up to 8 rows (a decode step's GQA group, a single MHA row, a speculative step's verified tokens
// x the group) with the positions in the 8 lanes instead of the rows: a K block of 8 positions x 8
// dimensions is transposed in registers and serves every row, and V rows are read along head_dim.
// Each (row, position) score, weight, running max, sum and accumulator goes through exactly the
// operations attend<V> gives it, in the same order (scores: one FMA chain over d from zero; maxima
// and the weight sum: position by position; V: one FMA per position in order), so a row's result is
// the same bits as in the rows-in-lanes kernel. R rows; J blocks of 8 positions and D blocks of 8
// dimensions at a time give the FMA chains room to overlap. head_dim must be a multiple of 8.
template <int R, int J, int D, typename E = F32Elements>
static void attend_keys_in_lanes(const float* const* q_rows, float* const* out_rows,
                                 const int64_t* num_positions, const typename E::T* k,
                                 const typename E::T* v, const int64_t* offsets, int64_t head_dim,
                                 float scale, float* scratch) {
  using T = typename E::T;
  using Y = lanes::Ymm;
  using S = lanes::Scalar;
  constexpr int64_t kTile = kAttentionPositionTile;
  static_assert(kTile % (8 * J) == 0);
  float* acc = scratch;                 // [R][head_dim]
  float* weights = acc + R * head_dim;  // [R][kTile]
  float running_max[R], denominator[R];
  int64_t max_positions = 0;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    running_max[r] = -std::numeric_limits<float>::infinity();
    denominator[r] = 0.0f;
    max_positions = std::max(max_positions, num_positions[r]);
    for (int64_t d = 0; d < head_dim; ++d) acc[r * head_dim + d] = 0.0f;
  }
  const __m256 lane_index = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t p0 = 0; p0 < max_positions; p0 += kTile) {
    const int64_t tile = std::min(kTile, max_positions - p0);
    // The next tile's K rows and this tile's V rows, requested into L2 now: they arrive while
    // this tile is scored (SmolLM2's shape at 300 positions, 2 threads, attention alone,
    // alternating: 1.0-1.4 -> 0.7-0.8 ms per token; 100 positions and 7B shapes unchanged).
    request_rows(k, offsets, p0 + kTile, std::min(max_positions, p0 + 2 * kTile), 0, head_dim);
    request_rows(v, offsets, p0, p0 + tile, 0, head_dim);
    // Scores for 8 * J positions at a time (missing ones read position p0 and are masked).
    for (int64_t j0 = 0; j0 < tile; j0 += 8 * J) {
      const T* keys[J][8];
#pragma GCC unroll 8
      for (int b = 0; b < J; ++b) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          const int64_t j = j0 + 8 * b + i;
          keys[b][i] = k + offsets[p0 + (j < tile ? j : 0)];
        }
      }
      __m256 s[J][R];
#pragma GCC unroll 8
      for (int b = 0; b < J; ++b) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) s[b][r] = Y::zero();
      }
      for (int64_t d0 = 0; d0 < head_dim; d0 += 8) {
#pragma GCC unroll 8
        for (int b = 0; b < J; ++b) {
          __m256 kt[8];
#pragma GCC unroll 8
          for (int i = 0; i < 8; ++i) kt[i] = E::load8(keys[b][i] + d0);
          transpose8(kt);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const float* q = q_rows[r] + d0;
#pragma GCC unroll 8
            for (int t = 0; t < 8; ++t) s[b][r] = Y::fmadd(Y::set1(q[t]), kt[t], s[b][r]);
          }
        }
      }
      for (int b = 0; b < J && j0 + 8 * b < tile; ++b) {
        const __m256 position = Y::add(Y::set1(static_cast<float>(p0 + j0 + 8 * b)), lane_index);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const auto valid = Y::less(position, Y::set1(static_cast<float>(num_positions[r])));
          Y::store(weights + r * kTile + j0 + 8 * b,
                   Y::select(valid, Y::mul(s[b][r], Y::set1(scale)),
                             Y::set1(-std::numeric_limits<float>::infinity())));
        }
      }
    }
    softmax_tile<R>(weights, kTile, weights, kTile, p0, tile, num_positions, running_max,
                    denominator, acc, head_dim, 0, head_dim);
    int64_t d0 = 0;
    for (; d0 + 8 * D <= head_dim; d0 += 8 * D)
      accumulate_values<R, D, E>(acc, head_dim, weights, v, offsets, p0, tile, d0);
    for (; d0 < head_dim; d0 += 8)
      accumulate_values<R, 1, E>(acc, head_dim, weights, v, offsets, p0, tile, d0);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const float inv = S::div(1.0f, denominator[r]);
    for (int64_t d = 0; d < head_dim; ++d) out_rows[r][d] = acc[r * head_dim + d] * inv;
  }
}

// attend_keys_in_lanes' positions (J blocks of 8) and dimensions (D blocks of 8) per pass for R
// rows: more where fewer rows leave registers free.
template <int R>
inline constexpr int kKeyBlocks = R == 1   ? 4
                                  : R == 2 ? 2
                                           : 1;
template <int R>
inline constexpr int kValueBlocks = R == 1   ? 4
                                    : R <= 4 ? 2
                                             : 1;

// attend_keys_in_lanes cut in two so that one (sequence, KV head) can be spread over threads,
// with the same bits: scores_in_lanes writes the scaled, masked scores of positions
// [p_begin, p_end) (p_begin a multiple of 8; whole blocks of 8 up to the padded end when p_end is
// the last position) to scores[r * stride + p], each one the FMA chain over d that kernel runs;
// values_in_lanes then runs the online softmax over every position, tile by tile as that kernel
// does (a few scalar operations and one exp per position, repeated by every thread that calls
// it), and the V accumulation for head dims [d_begin, d_end) only (multiples of 8): each
// dimension's FMA chain is the one the whole kernel runs.
template <int R, typename E = F32Elements>
static void scores_in_lanes(const float* const* q_rows, const int64_t* num_positions,
                            const typename E::T* k, const int64_t* offsets, int64_t head_dim,
                            float scale, int64_t p_begin, int64_t p_end, float* scores,
                            int64_t stride) {
  using Y = lanes::Ymm;
  int64_t max_positions = 0;
  for (int r = 0; r < R; ++r) max_positions = std::max(max_positions, num_positions[r]);
  const __m256 lane_index = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t p0 = p_begin; p0 < p_end; p0 += 8) {
    // The K rows 16 positions ahead, requested now into L2 (as values_in_lanes does for V; into
    // L1 the requests stalled on its few fill buffers: SmolLM2's shape at 1024 positions, 2
    // threads, 3 alternating runs: 4.4-4.5 -> 3.2-3.4 ms per token).
    request_rows(k, offsets, p0 + 16, std::min(p0 + 24, std::min(p_end, max_positions)), 0,
                 head_dim);
    const typename E::T* keys[8];
    for (int i = 0; i < 8; ++i) keys[i] = k + offsets[p0 + i < max_positions ? p0 + i : p_begin];
    __m256 s[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) s[r] = Y::zero();
    for (int64_t d0 = 0; d0 < head_dim; d0 += 8) {
      __m256 kt[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) kt[i] = E::load8(keys[i] + d0);
      transpose8(kt);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float* q = q_rows[r] + d0;
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) s[r] = Y::fmadd(Y::set1(q[t]), kt[t], s[r]);
      }
    }
    const __m256 position = Y::add(Y::set1(static_cast<float>(p0)), lane_index);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const auto valid = Y::less(position, Y::set1(static_cast<float>(num_positions[r])));
      Y::store(scores + r * stride + p0,
               Y::select(valid, Y::mul(s[r], Y::set1(scale)),
                         Y::set1(-std::numeric_limits<float>::infinity())));
    }
  }
}

// scratch: (R + 1) * head_dim + R * kAttentionPositionTile floats (at most scratch_floats).
template <int R, typename E = F32Elements>
static void values_in_lanes(const float* scores, int64_t stride, const int64_t* num_positions,
                            const typename E::T* v, const int64_t* offsets, int64_t head_dim,
                            int64_t d_begin, int64_t d_end, float* const* out_rows,
                            float* scratch) {
  using S = lanes::Scalar;
  constexpr int64_t kTile = kAttentionPositionTile;
  float* acc = scratch;                 // [R][head_dim], dims [d_begin, d_end) used
  float* weights = acc + R * head_dim;  // [R][kTile]
  float running_max[R], denominator[R];
  int64_t max_positions = 0;
  for (int r = 0; r < R; ++r) {
    running_max[r] = -std::numeric_limits<float>::infinity();
    denominator[r] = 0.0f;
    max_positions = std::max(max_positions, num_positions[r]);
    for (int64_t d = d_begin; d < d_end; ++d) acc[r * head_dim + d] = 0.0f;
  }
  for (int64_t p0 = 0; p0 < max_positions; p0 += kTile) {
    const int64_t tile = std::min(kTile, max_positions - p0);
    // This thread's slice of the next tile's V rows, requested now into L2: one slot apart, they
    // are too scattered for the hardware prefetchers (into L1: 4.6-5.9 -> 4.3-4.4 ms per token in
    // the measurement above).
    request_rows(v, offsets, p0 + kTile, std::min(max_positions, p0 + 2 * kTile), d_begin, d_end);
    softmax_tile<R>(scores + p0, stride, weights, kTile, p0, tile, num_positions, running_max,
                    denominator, acc, head_dim, d_begin, d_end);
    int64_t d0 = d_begin;
    for (; d0 + 16 <= d_end; d0 += 16)
      accumulate_values<R, 2, E>(acc, head_dim, weights, v, offsets, p0, tile, d0);
    for (; d0 < d_end; d0 += 8)
      accumulate_values<R, 1, E>(acc, head_dim, weights, v, offsets, p0, tile, d0);
  }
  for (int r = 0; r < R; ++r) {
    const float inv = S::div(1.0f, denominator[r]);
    for (int64_t d = d_begin; d < d_end; ++d) out_rows[r][d] = acc[r * head_dim + d] * inv;
  }
}

// IsaKernels::decode_kv: whole groups of 8 through the element policies, the tail (n % 8) by
// the scalar decoder (kv_format.h), which gives the same values.
[[maybe_unused]] static void decode_kv_any(KvFormat format, const void* src, float* dst,
                                           int64_t n) {
  with_elements(format, [&]<typename E>() {
    const auto* in = static_cast<const typename E::T*>(src);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, E::load8(in + i));
    if (i < n) decode_kv_row(scalar_kernels(), format, in + i, dst + i, n - i);
  });
}

// IsaKernels::encode_kv: F16 rows 8 values at a time through vcvtps2ph, clamped to +-65504 first
// as encode_kv_row clamps them (a prefill's K/V writes ran its scalar loop, ~2% of a SmolLM2 Q4_1
// 512-token prefill); a group holding a NaN, the tail and the other formats by encode_kv_row
// (vcvtps2ph keeps a NaN's payload where encode_kv_row writes one quiet NaN), so the same bytes.
[[maybe_unused]] static void encode_kv_any(KvFormat format, const float* src, void* dst,
                                           int64_t n) {
  if (format != KvFormat::kF16) return encode_kv_row(src, dst, n, format);
  auto* out = static_cast<uint16_t*>(dst);
  const __m256 lowest = _mm256_set1_ps(-65504.0f), highest = _mm256_set1_ps(65504.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0) {
      encode_kv_row(src + i, out + i, 8, format);
      continue;
    }
    const __m256 clamped = _mm256_min_ps(_mm256_max_ps(x, lowest), highest);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  if (i < n) encode_kv_row(src + i, out + i, n - i, format);
}

// The vector tables' decode kernels reading K/V in place in a KvFormat cache
// (IsaKernels::attend_rows_kv: 1 to 8 rows; attend_scores, attend_values: 1 to 4), head_dim a
// multiple of 8.
[[maybe_unused]] static void attend_decode_kv(KvFormat format, const float* const* q_rows,
                                              float* const* out_rows, const int64_t* num_positions,
                                              int64_t num_rows, const void* k, const void* v,
                                              const int64_t* offsets, int64_t head_dim, float scale,
                                              float* scratch) {
  with_elements(format, [&]<typename E>() {
    using T = typename E::T;
    const auto* kt = static_cast<const T*>(k);
    const auto* vt = static_cast<const T*>(v);
    with_row_count<kAttentionInPlaceMaxRows>(num_rows, [&]<int R>() {
      attend_keys_in_lanes<R, kKeyBlocks<R>, kValueBlocks<R>, E>(
          q_rows, out_rows, num_positions, kt, vt, offsets, head_dim, scale, scratch);
    });
  });
}

[[maybe_unused]] static void scores_any(KvFormat format, const float* const* q_rows,
                                        const int64_t* num_positions, int64_t num_rows,
                                        const void* k, const int64_t* offsets, int64_t head_dim,
                                        float scale, int64_t p_begin, int64_t p_end, float* scores,
                                        int64_t stride) {
  with_elements(format, [&]<typename E>() {
    with_row_count<kAttentionSplitMaxRows>(num_rows, [&]<int R>() {
      scores_in_lanes<R, E>(q_rows, num_positions, static_cast<const typename E::T*>(k), offsets,
                            head_dim, scale, p_begin, p_end, scores, stride);
    });
  });
}

[[maybe_unused]] static void values_any(KvFormat format, const float* scores, int64_t stride,
                                        const int64_t* num_positions, int64_t num_rows,
                                        const void* v, const int64_t* offsets, int64_t head_dim,
                                        int64_t d_begin, int64_t d_end, float* const* out_rows,
                                        float* scratch) {
  with_elements(format, [&]<typename E>() {
    with_row_count<kAttentionSplitMaxRows>(num_rows, [&]<int R>() {
      values_in_lanes<R, E>(scores, stride, num_positions, static_cast<const typename E::T*>(v),
                            offsets, head_dim, d_begin, d_end, out_rows, scratch);
    });
  });
}

// The vector tables' attend_rows: up to four rows (a decode step's GQA group) with positions in
// lanes when head_dim allows, else in 128-bit row lanes; more rows in chunks of Wide's lanes.
// Every path runs the same operations per (row, position), so the same bits.
template <typename Wide>
static void attend_any(const float* const* q_rows, float* const* out_rows,
                       const int64_t* num_positions, int64_t num_rows, const float* k,
                       const float* v, const int64_t* offsets, int64_t head_dim, float scale,
                       float* scratch) {
  if (num_rows <= 4 && head_dim % 8 == 0) {
    with_row_count<4>(num_rows, [&]<int R>() {
      attend_keys_in_lanes<R, kKeyBlocks<R>, kValueBlocks<R>>(q_rows, out_rows, num_positions, k, v,
                                                              offsets, head_dim, scale, scratch);
    });
    return;
  }
  if (num_rows <= 4) {
    attend<lanes::Xmm>(q_rows, out_rows, num_positions, num_rows, k, v, offsets, head_dim, scale,
                       scratch);
    return;
  }
  // Two groups of lanes per pass over the positions: the K/V rows are read half as often.
  for (int64_t r0 = 0; r0 < num_rows; r0 += 2 * Wide::kLanes) {
    const int64_t n = std::min<int64_t>(2 * Wide::kLanes, num_rows - r0);
    if (n > Wide::kLanes) {
      attend<Wide, false, 2>(q_rows + r0, out_rows + r0, num_positions + r0, n, k, v, offsets,
                             head_dim, scale, scratch);
    } else {
      attend<Wide>(q_rows + r0, out_rows + r0, num_positions + r0, n, k, v, offsets, head_dim,
                   scale, scratch);
    }
  }
}

// The vector tables' attend_rows_softcapped: the rows-in-lanes kernel only (rarely used, so no
// positions-in-lanes or split variants), 128-bit lanes for a decode's few rows.
template <typename Wide>
static void attend_softcapped_any(const float* const* q_rows, float* const* out_rows,
                                  const int64_t* num_positions, int64_t num_rows, const float* k,
                                  const float* v, const int64_t* offsets, int64_t head_dim,
                                  float scale, float softcap, float* scratch) {
  if (num_rows <= 4) {
    attend<lanes::Xmm, true>(q_rows, out_rows, num_positions, num_rows, k, v, offsets, head_dim,
                             scale, scratch, softcap);
    return;
  }
  for (int64_t r0 = 0; r0 < num_rows; r0 += Wide::kLanes) {
    attend<Wide, true>(q_rows + r0, out_rows + r0, num_positions + r0,
                       std::min<int64_t>(Wide::kLanes, num_rows - r0), k, v, offsets, head_dim,
                       scale, scratch, softcap);
  }
}
#endif

}  // namespace lm::kernels::attention_rows
