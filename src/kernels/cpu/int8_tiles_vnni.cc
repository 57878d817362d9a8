// The register-tiled int8 GEMM on AVX-512 VNNI (see int8_tiles.h). Built with -mavx512f/bw/vl/vnni
// and used only when cpuid reports them.
//
// A step is 64 activations: two GGML blocks (Q8_0, Q4_0, Q4_1) or two groups of 32 of a K-quant
// super-block. Weights become unsigned bytes (Q8_0: xor 0x80, i.e. +128; the 4/5/6-bit values
// already are) and the zero point z they carry (128, 8, 32; 0 for the formats with a minimum) is
// taken back through the int32 accumulator's starting value, -z * (sum of the 4 activations of
// the lane), which the prepared activations carry. So per (weight row, activation row, step):
//   dot = vpdpbusd(-z * lane_sums(x), u(w), q(x))                 exact in int32
//   acc += (weight scale * activation scale per lane) * float(dot)
//   acc += weight minimum per lane * (activation scale * lane sum)  (Q4_1, Q4_K, Q5_K only)
// Q6_K's 16-element scales fit because every int32 lane covers 4 elements of one 16.
// NOTE: as in kernels_avx2.cc, nothing here may instantiate inline functions or templates with
// external linkage: only internal-linkage helpers and intrinsics.
#include "kernels/cpu/int8_tiles.h"

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__F16C__)

// GCC 12's AVX-512 intrinsics initialise their "undefined" vectors from themselves (GCC PR
// 105593), which -Wuninitialized reports at every use; the warning is about the header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/kquant_blocks.h"

namespace lm::kernels {
namespace {

constexpr int64_t kStep = 64;

// One step of a prepared activation row (192 bytes, one cache line each part).
struct alignas(64) PreparedStep {
  int8_t q[64];     // the activations in the weight unpack's byte order
  float scale[16];  // each int32 lane's activation block scale
  // Per lane: -z * (sum of its 4 q) as int32 for zero-point formats, or, as fp32 bits,
  // scale * (sum of its 4 q) for formats with a minimum.
  int32_t correction[16];
};
static_assert(sizeof(PreparedStep) == 192);

// How a step's 64 bytes map to elements. kBlocks: bytes 0-31 are the first block (group), 32-63
// the second. kNibbleHalves (the 16 packed bytes of a 32-block give elements 0-15 in their low
// nibbles and 16-31 in their high ones): b0[0, 16), b1[0, 16), b0[16, 32), b1[16, 32).
enum class Order { kBlocks, kNibbleHalves };

struct Traits {
  bool tiled;
  Order order;
  int zero;
  bool has_min;
};

constexpr Traits traits(RowFormat format) {
  switch (format) {
    case RowFormat::kQ8_0:
      return {true, Order::kBlocks, 128, false};
    case RowFormat::kQ4_0:
      return {true, Order::kNibbleHalves, 8, false};
    case RowFormat::kQ4_1:
      return {true, Order::kNibbleHalves, 0, true};
    case RowFormat::kQ5_0:
      return {true, Order::kNibbleHalves, 16, false};
    case RowFormat::kQ5_1:
      return {true, Order::kNibbleHalves, 0, true};
    case RowFormat::kQ4_K:
    case RowFormat::kQ5_K:
      return {true, Order::kBlocks, 0, true};
    case RowFormat::kQ6_K:
      return {true, Order::kBlocks, 32, false};
    default:
      return {false, Order::kBlocks, 0, false};
  }
}

// Lane l of a step takes value index[l] of a small vector: the block (group) each lane belongs to.
static inline __m512i lane_blocks(Order order) {
  return order == Order::kBlocks
             ? _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)
             : _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
}

// Two fp16 fields (unaligned) as fp32 lanes 0 and 1 of a vector.
static inline __m512 f16_pair(const uint8_t* a, const uint8_t* b) {
  uint16_t ha, hb;
  std::memcpy(&ha, a, 2);
  std::memcpy(&hb, b, 2);
  const __m128 pair = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(ha | (uint32_t{hb} << 16))));
  return _mm512_zextps128_ps512(pair);
}

static inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 32 bytes of nibbles as 64 bytes: the low nibbles, then the high ones.
static inline __m512i split_nibbles(__m256i packed) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  return _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_and_si256(packed, mask)),
                            _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask), 1);
}

// ---- Activations ----

void prepare_row(Traits t, const BlockQ8Act* xq, int64_t steps, PreparedStep* out) {
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i blocks = lane_blocks(t.order);
  for (int64_t s = 0; s < steps; ++s) {
    const BlockQ8Act& b0 = xq[2 * s];
    const BlockQ8Act& b1 = xq[2 * s + 1];
    PreparedStep& p = out[s];
    if (t.order == Order::kBlocks) {
      std::memcpy(p.q, b0.qs, 32);
      std::memcpy(p.q + 32, b1.qs, 32);
    } else {
      std::memcpy(p.q, b0.qs, 16);
      std::memcpy(p.q + 16, b1.qs, 16);
      std::memcpy(p.q + 32, b0.qs + 16, 16);
      std::memcpy(p.q + 48, b1.qs + 16, 16);
    }
    const __m512 scale =
        _mm512_permutexvar_ps(blocks, _mm512_zextps128_ps512(_mm_setr_ps(b0.d, b1.d, 0, 0)));
    _mm512_store_ps(p.scale, scale);
    // u8 x s8 with u = 1: the sum of each lane's 4 signed activations.
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_load_si512(p.q));
    if (t.has_min) {
      _mm512_store_ps(p.correction, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(sums)));
    } else {
      _mm512_store_si512(p.correction, _mm512_mullo_epi32(sums, _mm512_set1_epi32(-t.zero)));
    }
  }
}

// ---- Weights: one row's step s as unsigned bytes u, per-lane scale dw and minimum mw ----

// The fifth bits of two Q5 blocks (bit i of a block's 32-bit qh is element i's) as a byte mask in
// the kNibbleHalves order: b0[0, 16), b1[0, 16), b0[16, 32), b1[16, 32).
static inline __m512i q5_high_bits(const uint8_t* qh0, const uint8_t* qh1) {
  uint32_t h0, h1;
  std::memcpy(&h0, qh0, 4);
  std::memcpy(&h1, qh1, 4);
  const uint64_t bits = (h0 & 0xffffu) | (uint64_t{h1 & 0xffffu} << 16) |
                        (uint64_t{h0 >> 16} << 32) | (uint64_t{h1 >> 16} << 48);
  return _mm512_maskz_mov_epi8(static_cast<__mmask64>(bits), _mm512_set1_epi8(16));
}

// Where the fields of a 32-element nibble block sit (GGML's layouts): fp16 d at 0, an fp16
// minimum (Q4_1, Q5_1), the 32 fifth bits (Q5_0, Q5_1), then 16 bytes of nibbles. -1: absent.
struct NibbleBlock {
  int64_t bytes, min, qh, qs;
};

constexpr NibbleBlock nibble_block(RowFormat format) {
  switch (format) {
    case RowFormat::kQ4_0:
      return {18, -1, -1, 2};
    case RowFormat::kQ4_1:
      return {20, 2, -1, 4};
    case RowFormat::kQ5_0:
      return {22, -1, 2, 6};
    default:  // kQ5_1
      return {24, 2, 4, 8};
  }
}

// Q4_0, Q4_1, Q5_0, Q5_1 (the other formats are specialised below): two blocks per step.
template <RowFormat F>
struct WeightRow {
  const uint8_t* row;
  void step(int64_t s, __m512i& u, __m512& dw, __m512& mw) {
    constexpr NibbleBlock kB = nibble_block(F);
    const uint8_t* b = row + s * 2 * kB.bytes;
    const uint8_t* b1 = b + kB.bytes;
    u = split_nibbles(_mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b1 + kB.qs),
                                          reinterpret_cast<const __m128i*>(b + kB.qs)));
    if constexpr (kB.qh >= 0) u = _mm512_or_si512(u, q5_high_bits(b + kB.qh, b1 + kB.qh));
    const __m512i blocks = lane_blocks(Order::kNibbleHalves);
    dw = _mm512_permutexvar_ps(blocks, f16_pair(b, b1));
    if constexpr (kB.min >= 0)
      mw = _mm512_permutexvar_ps(blocks, f16_pair(b + kB.min, b1 + kB.min));
  }
};

template <>
struct WeightRow<RowFormat::kQ8_0> {
  const uint8_t* row;
  void step(int64_t s, __m512i& u, __m512& dw, __m512&) {
    const uint8_t* b = row + s * 68;
    const __m512i w =
        _mm512_inserti64x4(_mm512_zextsi256_si512(load256(b + 2)), load256(b + 36), 1);
    u = _mm512_xor_si512(w, _mm512_set1_epi8(static_cast<char>(0x80)));
    dw = _mm512_permutexvar_ps(lane_blocks(Order::kBlocks), f16_pair(b, b + 34));
  }
};

// Q4_K / Q5_K: the 8 group scales d * sc and minimums -dmin * mn of the current super-block.
struct KGroupScales {
  alignas(32) float scale[8];
  alignas(32) float min[8];

  void load(const uint8_t* block) {
    // The 6-bit fields of unpack_scales_k4, four bytes at a time.
    uint32_t s[3];
    std::memcpy(s, block + kquant::kScalesOffset, 12);
    const uint32_t sc_lo = s[0] & 0x3f3f3f3f;
    const uint32_t mn_lo = s[1] & 0x3f3f3f3f;
    const uint32_t sc_hi = (s[2] & 0x0f0f0f0f) | ((s[0] >> 2) & 0x30303030);
    const uint32_t mn_hi = ((s[2] >> 4) & 0x0f0f0f0f) | ((s[1] >> 2) & 0x30303030);
    uint16_t hd, hm;
    std::memcpy(&hd, block, 2);
    std::memcpy(&hm, block + 2, 2);
    const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
        _mm_cvtsi64_si128(static_cast<int64_t>(sc_lo | (uint64_t{sc_hi} << 32)))));
    const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
        _mm_cvtsi64_si128(static_cast<int64_t>(mn_lo | (uint64_t{mn_hi} << 32)))));
    _mm256_store_ps(scale, _mm256_mul_ps(sc, _mm256_set1_ps(_cvtsh_ss(hd))));
    _mm256_store_ps(min, _mm256_mul_ps(mn, _mm256_set1_ps(-_cvtsh_ss(hm))));
  }
  // Lanes 0-7 take group 2p's value, lanes 8-15 group 2p + 1's.
  static __m512 pair_lanes(const float* v, int64_t p) {
    const __m512i idx =
        _mm512_add_epi32(lane_blocks(Order::kBlocks), _mm512_set1_epi32(static_cast<int>(2 * p)));
    return _mm512_permutexvar_ps(idx, _mm512_zextps256_ps512(_mm256_load_ps(v)));
  }
};

template <>
struct WeightRow<RowFormat::kQ4_K> {
  const uint8_t* row;
  KGroupScales scales;
  void step(int64_t s, __m512i& u, __m512& dw, __m512& mw) {
    const uint8_t* block = row + (s / 4) * kquant::kQ4_KBytes;
    const int64_t p = s % 4;
    if (p == 0) scales.load(block);
    // Groups 2p and 2p + 1 are the low and high nibbles of the same 32 bytes.
    u = split_nibbles(load256(block + kquant::kQ4_KQsOffset + 32 * p));
    dw = KGroupScales::pair_lanes(scales.scale, p);
    mw = KGroupScales::pair_lanes(scales.min, p);
  }
};

template <>
struct WeightRow<RowFormat::kQ5_K> {
  const uint8_t* row;
  KGroupScales scales;
  void step(int64_t s, __m512i& u, __m512& dw, __m512& mw) {
    const uint8_t* block = row + (s / 4) * kquant::kQ5_KBytes;
    const int64_t p = s % 4;
    if (p == 0) scales.load(block);
    const __m512i low = split_nibbles(load256(block + kquant::kQ5_KQsOffset + 32 * p));
    // Group g's fifth bits are bit g of the 32 qh bytes: bits 2p (lanes 0-7) and 2p + 1 (8-15).
    const __m256i qh = load256(block + kquant::kQ5_KQhOffset);
    const __m512i both =
        _mm512_inserti64x4(_mm512_zextsi256_si512(qh), _mm256_srli_epi16(qh, 1), 1);
    const __m512i bit =
        _mm512_and_si512(_mm512_srl_epi16(both, _mm_cvtsi64_si128(2 * p)), _mm512_set1_epi8(1));
    u = _mm512_or_si512(low, _mm512_slli_epi16(bit, 4));
    dw = KGroupScales::pair_lanes(scales.scale, p);
    mw = KGroupScales::pair_lanes(scales.min, p);
  }
};

template <>
struct WeightRow<RowFormat::kQ6_K> {
  const uint8_t* row;
  float d = 0.0f;
  void step(int64_t s, __m512i& u, __m512& dw, __m512&) {
    const uint8_t* block = row + (s / 4) * kquant::kQ6_KBytes;
    const int64_t p = s % 4;
    if (p == 0) {
      uint16_t h;
      std::memcpy(&h, block + kquant::kQ6_KDOffset, 2);
      d = _cvtsh_ss(h);
    }
    // Groups 2p, 2p + 1 (kquant::group_values_q6_k): the two 32-byte runs of ql in the same
    // 128-value half, low nibbles for p even and high for p odd, and bit pairs 2t, 2t + 2 of qh
    // (t = 2 * (p % 2)) for the top two bits.
    const int64_t half = p / 2;
    const int64_t t = 2 * (p % 2);
    const __m512i ql = _mm512_loadu_si512(reinterpret_cast<const __m512i*>(block + 64 * half));
    const __m512i low =
        _mm512_and_si512(_mm512_srl_epi16(ql, _mm_cvtsi64_si128(2 * t)), _mm512_set1_epi8(0x0f));
    const __m256i qh = load256(block + kquant::kQ6_KQhOffset + 32 * half);
    const __m512i both =
        _mm512_inserti64x4(_mm512_zextsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
    const __m512i top =
        _mm512_and_si512(_mm512_srl_epi16(both, _mm_cvtsi64_si128(2 * t)), _mm512_set1_epi8(3));
    u = _mm512_or_si512(low, _mm512_slli_epi16(top, 4));
    // Lanes 4j..4j+3 cover the 16 values of scale 4p + j.
    int32_t sc4;
    std::memcpy(&sc4, block + kquant::kQ6_KScalesOffset + 4 * p, 4);
    const __m128 sc =
        _mm_mul_ps(_mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(sc4))), _mm_set1_ps(d));
    dw = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                               _mm512_zextps128_ps512(sc));
  }
};

// ---- The tile ----

// Bytes of a weight row per step of 64 (K-quants: a quarter of a super-block, rounded down).
template <RowFormat F>
constexpr int64_t kStepBytes = F == RowFormat::kQ8_0   ? 68
                               : F == RowFormat::kQ4_0 ? 36
                               : F == RowFormat::kQ4_1 ? 40
                               : F == RowFormat::kQ5_0 ? 44
                               : F == RowFormat::kQ5_1 ? 48
                               : F == RowFormat::kQ4_K ? kquant::kQ4_KBytes / 4
                               : F == RowFormat::kQ5_K ? kquant::kQ5_KBytes / 4
                                                       : kquant::kQ6_KBytes / 4;
// How far ahead of the current step a streamed weight row is prefetched: into L1 at 2 KiB
// (measured on the 7B Q4_0 decode: beat 0.5, 1, 4 and 8 KiB) and into L2 at 16 KiB (on top of
// the L1 hint: 7B Q4_0 / Q4_K_M decode +11-18% at 1 and 2 threads; 8 KiB did about as well).
constexpr int64_t kPrefetchL1Bytes = 2048;
constexpr int64_t kPrefetchL2Bytes = 16384;

// RW weight rows (w_row_bytes apart) against RX prepared activation rows (steps apart).
template <RowFormat F, int RW, int RX>
void tile(const uint8_t* w, int64_t w_row_bytes, const PreparedStep* x, int64_t steps, float* y,
          int64_t ldy) {
  constexpr Traits kT = traits(F);
  WeightRow<F> rows[RW];
  for (int j = 0; j < RW; ++j) rows[j].row = w + j * w_row_bytes;
  __m512 acc[RX][RW];
  for (int i = 0; i < RX; ++i) {
    for (int j = 0; j < RW; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t s = 0; s < steps; ++s) {
    // Decode streams each weight row from DRAM once; the hardware prefetcher alone left the
    // unpack waiting on its loads (perf: half the samples on the first load of a block). Tiles of
    // 4 rows re-read weights that are already cached.
    if constexpr (RW == 1) {
      const char* next = reinterpret_cast<const char*>(rows[0].row + s * kStepBytes<F>);
      _mm_prefetch(next + kPrefetchL1Bytes, _MM_HINT_T0);
      _mm_prefetch(next + kPrefetchL2Bytes, _MM_HINT_T1);
    }
    __m512i u[RW];
    __m512 dw[RW], mw[RW];
#pragma GCC unroll 4
    for (int j = 0; j < RW; ++j) rows[j].step(s, u[j], dw[j], mw[j]);
#pragma GCC unroll 4
    for (int i = 0; i < RX; ++i) {
      const PreparedStep& p = x[i * steps + s];
      const __m512i q = _mm512_load_si512(p.q);
      const __m512 dx = _mm512_load_ps(p.scale);
#pragma GCC unroll 4
      for (int j = 0; j < RW; ++j) {
        const __m512i init = kT.has_min ? _mm512_setzero_si512() : _mm512_load_si512(p.correction);
        const __m512i dot = _mm512_dpbusd_epi32(init, u[j], q);
        acc[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(dw[j], dx), _mm512_cvtepi32_ps(dot), acc[i][j]);
        if constexpr (kT.has_min)
          acc[i][j] = _mm512_fmadd_ps(mw[j], _mm512_load_ps(p.correction), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < RX; ++i) {
    for (int j = 0; j < RW; ++j) y[i * ldy + j] = _mm512_reduce_add_ps(acc[i][j]);
  }
}

// RW weight rows against all m activation rows, 4 (then 2, then 1) at a time; the weight rows
// stay in L1 while the activations stream past.
template <RowFormat F, int RW>
void rows_against_all(const uint8_t* w, int64_t w_row_bytes, const PreparedStep* x, int64_t m,
                      int64_t steps, float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) tile<F, RW, 4>(w, w_row_bytes, x + i * steps, steps, y + i * ldy, ldy);
  if (i + 2 <= m) {
    tile<F, RW, 2>(w, w_row_bytes, x + i * steps, steps, y + i * ldy, ldy);
    i += 2;
  }
  if (i < m) tile<F, RW, 1>(w, w_row_bytes, x + i * steps, steps, y + i * ldy, ldy);
}

// Decode (one activation row) streams weight rows one at a time: four interleaved row streams
// measured 30-50% slower out of DRAM on the 7B shapes (the prefetchers follow one stream per row
// less well), and with one activation row there is no unpack to share. From two rows on, four
// weight rows per tile share each activation load.
template <RowFormat F>
void gemm(const uint8_t* w, int64_t w_row_bytes, int64_t n, const PreparedStep* x, int64_t m,
          int64_t steps, float* y, int64_t ldy) {
  int64_t j = 0;
  if (m > 1) {
    for (; j + 4 <= n; j += 4)
      rows_against_all<F, 4>(w + j * w_row_bytes, w_row_bytes, x, m, steps, y + j, ldy);
  }
  for (; j < n; ++j)
    rows_against_all<F, 1>(w + j * w_row_bytes, w_row_bytes, x, m, steps, y + j, ldy);
}

}  // namespace

int64_t int8_tile_row_bytes_vnni(RowFormat format, int64_t k) {
  if (!traits(format).tiled || k <= 0 || k % kStep != 0) return 0;
  return k / kStep * static_cast<int64_t>(sizeof(PreparedStep));
}

void int8_tile_prepare_vnni(RowFormat format, const BlockQ8Act* xq, int64_t xq_stride, int64_t m,
                            int64_t k, void* dst) {
  const int64_t steps = k / kStep;
  auto* out = static_cast<PreparedStep*>(dst);
  for (int64_t i = 0; i < m; ++i)
    prepare_row(traits(format), xq + i * xq_stride, steps, out + i * steps);
}

void int8_tile_gemm_vnni(RowFormat format, const void* w, int64_t w_row_bytes, int64_t n,
                         const void* x, int64_t m, int64_t k, float* y, int64_t ldy) {
  const auto* bytes = static_cast<const uint8_t*>(w);
  const auto* prepared = static_cast<const PreparedStep*>(x);
  const int64_t steps = k / kStep;
  switch (format) {
    case RowFormat::kQ8_0:
      return gemm<RowFormat::kQ8_0>(bytes, w_row_bytes, n, prepared, m, steps, y, ldy);
    case RowFormat::kQ4_0:
      return gemm<RowFormat::kQ4_0>(bytes, w_row_bytes, n, prepared, m, steps, y, ldy);
    case RowFormat::kQ4_1:
      return gemm<RowFormat::kQ4_1>(bytes, w_row_bytes, n, prepared, m, steps, y, ldy);
    case RowFormat::kQ5_0:
      return gemm<RowFormat::kQ5_0>(bytes, w_row_bytes, n, prepared, m, steps, y, ldy);
    case RowFormat::kQ5_1:
      return gemm<RowFormat::kQ5_1>(bytes, w_row_bytes, n, prepared, m, steps, y, ldy);
    case RowFormat::kQ4_K:
      return gemm<RowFormat::kQ4_K>(bytes, w_row_bytes, n, prepared, m, steps, y, ldy);
    case RowFormat::kQ5_K:
      return gemm<RowFormat::kQ5_K>(bytes, w_row_bytes, n, prepared, m, steps, y, ldy);
    case RowFormat::kQ6_K:
      return gemm<RowFormat::kQ6_K>(bytes, w_row_bytes, n, prepared, m, steps, y, ldy);
    default:
      break;
  }
}

}  // namespace lm::kernels

#pragma GCC diagnostic pop

#else  // No VNNI in this build: the table never points here (isa_supported(kAvx512Vnni) is false).

namespace lm::kernels {
int64_t int8_tile_row_bytes_vnni(RowFormat, int64_t) { return 0; }
void int8_tile_prepare_vnni(RowFormat, const BlockQ8Act*, int64_t, int64_t, int64_t, void*) {}
void int8_tile_gemm_vnni(RowFormat, const void*, int64_t, int64_t, const void*, int64_t, int64_t,
                         float*, int64_t) {}
}  // namespace lm::kernels

#endif
