// AVX-512 VNNI int8 dots (built with -mavx512f/bw/vl/vnni; used only after cpuid says so): the
// AVX2 int8 kernels with maddubs + madd (two instructions, an int16 intermediate) replaced by one
// vpdpbusd (u8 x s8 summed straight into int32 lanes), on 256-bit registers so each GGML block of
// 32 is one instruction. Everything else comes from the AVX-512 table.
// NOTE: as in kernels_avx2.cc, nothing here may instantiate inline functions or templates with
// external linkage: only internal-linkage helpers and intrinsics.
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/isa.h"

#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/avx2_block_unpack.h"

namespace lm::kernels {
namespace {

float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// R activation rows against one weight row in block format F: each weight block is unpacked once
// for the R rows. Signed weights: vpdpbusd needs an unsigned operand, so |w| once and w's sign on
// each x (as the AVX2 kernel does).
template <RowFormat F, int R>
void dot_rows(const uint8_t* row, const BlockQ8Act* xq, int64_t xq_stride, int64_t num_blocks,
              float* out, int64_t out_stride) {
  constexpr bool kSigned = F == RowFormat::kQ8_0 || F == RowFormat::kQ4_0 || F == RowFormat::kQ5_0;
  constexpr bool kOffset = F == RowFormat::kQ4_1 || F == RowFormat::kQ5_1;
  constexpr int64_t kBytes = F == RowFormat::kQ8_0   ? 34
                             : F == RowFormat::kQ4_0 ? 18
                             : F == RowFormat::kQ4_1 ? 20
                             : F == RowFormat::kQ5_0 ? 22
                                                     : 24;
  __m256 acc[R];
  float offsets[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    offsets[r] = 0.0f;
  }
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = row + b * kBytes;
    __m256i w;
    if constexpr (F == RowFormat::kQ8_0) {
      w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    } else if constexpr (F == RowFormat::kQ4_0) {
      w = _mm256_sub_epi8(avx2::nibbles_to_bytes(block + 2), _mm256_set1_epi8(8));
    } else if constexpr (F == RowFormat::kQ4_1) {
      w = avx2::nibbles_to_bytes(block + 4);
    } else if constexpr (F == RowFormat::kQ5_0) {
      w = _mm256_sub_epi8(avx2::q5_to_bytes(block + 2, block + 6), _mm256_set1_epi8(16));
    } else {
      w = avx2::q5_to_bytes(block + 4, block + 8);
    }
    const float d = load_f16(block);
    const __m256i w_abs = kSigned ? _mm256_abs_epi8(w) : w;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const BlockQ8Act& a = xq[r * xq_stride + b];
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
      const __m256i x = kSigned ? _mm256_sign_epi8(q, w) : q;
      const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w_abs, x);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * a.d), _mm256_cvtepi32_ps(dot), acc[r]);
      if constexpr (kOffset) offsets[r] += load_f16(block + 2) * a.s;
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_stride] = hsum(acc[r]) + offsets[r];
}

template <RowFormat F>
void dot_rows_format(const uint8_t* row, const BlockQ8Act* xq, int64_t xq_stride, int64_t m,
                     int64_t num_blocks, float* out, int64_t out_stride) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    dot_rows<F, 4>(row, xq + i * xq_stride, xq_stride, num_blocks, out + i * out_stride,
                   out_stride);
  }
  for (; i < m; ++i) {
    dot_rows<F, 1>(row, xq + i * xq_stride, xq_stride, num_blocks, out + i * out_stride,
                   out_stride);
  }
}

void dot_rows_q8_vnni(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t xq_stride,
                      int64_t m, int64_t k, float* out, int64_t out_stride) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  const int64_t nb = k / 32;
  switch (format) {
    case RowFormat::kQ8_0:
      return dot_rows_format<RowFormat::kQ8_0>(bytes, xq, xq_stride, m, nb, out, out_stride);
    case RowFormat::kQ4_0:
      return dot_rows_format<RowFormat::kQ4_0>(bytes, xq, xq_stride, m, nb, out, out_stride);
    case RowFormat::kQ4_1:
      return dot_rows_format<RowFormat::kQ4_1>(bytes, xq, xq_stride, m, nb, out, out_stride);
    case RowFormat::kQ5_0:
      return dot_rows_format<RowFormat::kQ5_0>(bytes, xq, xq_stride, m, nb, out, out_stride);
    case RowFormat::kQ5_1:
      return dot_rows_format<RowFormat::kQ5_1>(bytes, xq, xq_stride, m, nb, out, out_stride);
    default:  // K-quants: the AVX2 kernels.
      return dot_rows_q8_avx2(format, row, xq, xq_stride, m, k, out, out_stride);
  }
}

float dot_row_q8_vnni(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k) {
  float out = 0.0f;
  dot_rows_q8_vnni(format, row, xq, 0, 1, k, &out, 1);
  return out;
}

}  // namespace

const IsaKernels& avx512_vnni_kernels() {
  static const IsaKernels kKernels = [] {
    IsaKernels kernels = avx512_kernels();
    kernels.dot_row_q8 = dot_row_q8_vnni;
    kernels.dot_rows_q8 = dot_rows_q8_vnni;
    return kernels;
  }();
  return kKernels;
}

}  // namespace lm::kernels

#else  // No VNNI in this build: isa_supported(kAvx512Vnni) is false on such targets, never used.

namespace lm::kernels {
const IsaKernels& avx512_vnni_kernels() { return avx512_kernels(); }
}  // namespace lm::kernels

#endif
