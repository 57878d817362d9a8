// AVX2's own inner loops (built with -mavx2 -mfma -mf16c; used only after cpuid says so): the row
// formats (dequantize, fp32 dot) and the int8 entries. The ops written once against the lane
// policies come from lanes/ (isa.cc adds both to the AVX2 table).
// NOTE: this file must not instantiate inline functions or templates with external linkage
// (std::, base/fp16.h): the linker could keep the AVX2 copy for the whole program and crash
// older CPUs. Everything here has internal linkage or is an intrinsic.
#include "kernels/cpu/bnb4_avx2.h"
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/int8_interleaved.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kquants_avx2.h"
#include "kernels/cpu/lowbit_quants_avx2.h"
#include "kernels/cpu/q4_z128_blocks.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "base/check.h"
#include "kernels/cpu/avx2_block_unpack.h"
#include "kernels/cpu/lanes/vector_f32.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

using avx2::hsum;
using avx2::load_f16;

float load_bf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

__m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

__m256 load_bf16x8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// The 32 quantized values of a block as four vectors of 8 floats (elements 0-7, ..., 24-31),
// before scaling: q for Q8_0, nibble - 8 for Q4_0, nibble for Q4_1.
struct BlockValues {
  __m256 v[4];
};

BlockValues unpack_q8_0(const uint8_t* block) {
  const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
  const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18));
  return {{_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0)),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8))),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1)),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q1, 8)))}};
}

// 16 bytes of nibbles: low nibbles are elements 0-15, high nibbles 16-31.
BlockValues unpack_nibbles(const uint8_t* qs, int offset) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m128i bias = _mm_set1_epi8(static_cast<char>(offset));
  const __m128i lo = _mm_sub_epi8(_mm_and_si128(raw, mask), bias);
  const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), mask), bias);
  return {{_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))}};
}

// 32 signed bytes (element order) as four vectors of 8 floats.
BlockValues bytes_to_floats(__m256i q) {
  const __m128i lo = _mm256_castsi256_si128(q);
  const __m128i hi = _mm256_extracti128_si256(q, 1);
  return {{_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))}};
}

// One block's values before scaling, its scale d and offset m (0 for the symmetric formats):
// value = q * d + m.
struct UnpackedBlock {
  BlockValues q;
  float d;
  float m;
};

// F is a template argument so each format's loop inlines its own unpacking (no per-block switch).
template <RowFormat F>
inline UnpackedBlock unpack_block(const uint8_t* block) {
  if constexpr (F == RowFormat::kQ8_0) {
    return {unpack_q8_0(block), load_f16(block), 0.0f};
  } else if constexpr (F == RowFormat::kQ4_0) {
    return {unpack_nibbles(block + 2, 8), load_f16(block), 0.0f};
  } else if constexpr (F == RowFormat::kQ4_1) {
    return {unpack_nibbles(block + 4, 0), load_f16(block), load_f16(block + 2)};
  } else if constexpr (F == RowFormat::kQ5_0) {
    return {bytes_to_floats(
                _mm256_sub_epi8(avx2::q5_to_bytes(block + 2, block + 6), _mm256_set1_epi8(16))),
            load_f16(block), 0.0f};
  } else {
    static_assert(F == RowFormat::kQ5_1);
    return {bytes_to_floats(avx2::q5_to_bytes(block + 4, block + 8)), load_f16(block),
            load_f16(block + 2)};
  }
}

// Block values with scale and offset applied: q * d + m.
template <RowFormat F>
void dequantize_blocks(const uint8_t* src, float* dst, int64_t num_blocks) {
  const int64_t block_bytes = row_format_info(F).block_bytes;
  for (int64_t b = 0; b < num_blocks; ++b, dst += 32) {
    const UnpackedBlock u = unpack_block<F>(src + b * block_bytes);
    const __m256 d = _mm256_set1_ps(u.d);
    const __m256 m = _mm256_set1_ps(u.m);
    for (int g = 0; g < 4; ++g) _mm256_storeu_ps(dst + 8 * g, _mm256_fmadd_ps(u.q.v[g], d, m));
  }
}

void dequantize_row(RowFormat format, const void* src, float* dst, int64_t k) {
  switch (format) {
    case RowFormat::kF32:
      std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
      return;
    case RowFormat::kF16:
    case RowFormat::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      const bool is_f16 = format == RowFormat::kF16;
      int64_t i = 0;
      for (; i + 8 <= k; i += 8) {
        _mm256_storeu_ps(dst + i, is_f16 ? load_f16x8(h + i) : load_bf16x8(h + i));
      }
      for (; i < k; ++i) {
        dst[i] = is_f16 ? _cvtsh_ss(h[i]) : load_bf16(h[i]);
      }
      return;
    }
    case RowFormat::kQ8_0:
      return dequantize_blocks<RowFormat::kQ8_0>(static_cast<const uint8_t*>(src), dst, k / 32);
    case RowFormat::kQ4_0:
      return dequantize_blocks<RowFormat::kQ4_0>(static_cast<const uint8_t*>(src), dst, k / 32);
    case RowFormat::kQ4_1:
      return dequantize_blocks<RowFormat::kQ4_1>(static_cast<const uint8_t*>(src), dst, k / 32);
    case RowFormat::kQ5_0:
      return dequantize_blocks<RowFormat::kQ5_0>(static_cast<const uint8_t*>(src), dst, k / 32);
    case RowFormat::kQ5_1:
      return dequantize_blocks<RowFormat::kQ5_1>(static_cast<const uint8_t*>(src), dst, k / 32);
    case RowFormat::kQ4_K:
    case RowFormat::kQ5_K:
    case RowFormat::kQ6_K:
      dequantize_row_kquant_avx2(format, src, dst, k);
      return;
    case RowFormat::kQ2_K:
    case RowFormat::kQ3_K:
    case RowFormat::kIQ4_NL:
    case RowFormat::kIQ4_XS:
      dequantize_row_lowbit_avx2(format, src, dst, k);
      return;
    case RowFormat::kNF4:
    case RowFormat::kFP4:
      dequantize_row_bnb4_avx2(format, src, dst, k);
      return;
    case RowFormat::kQ4_Z128:  // the scalar definition: its weights run interleaved (int8 path)
      dequantize_row_q4_z128(src, dst, k);
      return;
  }
}

template <RowFormat F>
float dot_blocks(const uint8_t* row, const float* x, int64_t num_blocks) {
  const int64_t block_bytes = row_format_info(F).block_bytes;
  constexpr bool has_offset = F == RowFormat::kQ4_1 || F == RowFormat::kQ5_1;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b, x += 32) {
    const __m256 x0 = _mm256_loadu_ps(x);
    const __m256 x1 = _mm256_loadu_ps(x + 8);
    const __m256 x2 = _mm256_loadu_ps(x + 16);
    const __m256 x3 = _mm256_loadu_ps(x + 24);
    const UnpackedBlock u = unpack_block<F>(row + b * block_bytes);
    // sum(q * d * x) = d * sum(q * x); the offset formats add m * sum(x).
    __m256 qx = _mm256_mul_ps(u.q.v[0], x0);
    qx = _mm256_fmadd_ps(u.q.v[1], x1, qx);
    qx = _mm256_fmadd_ps(u.q.v[2], x2, qx);
    qx = _mm256_fmadd_ps(u.q.v[3], x3, qx);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(u.d), qx, acc);
    if constexpr (has_offset) {
      const __m256 sx = _mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(u.m), sx, acc);
    }
  }
  return hsum(acc);
}

float dot_row(RowFormat format, const void* row, const float* x, int64_t k) {
  switch (format) {
    case RowFormat::kF32:
      return lanes::dot_f32<lanes::Ymm>(static_cast<const float*>(row), x, k);
    case RowFormat::kF16:
    case RowFormat::kBF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      const bool is_f16 = format == RowFormat::kF16;
      __m256 acc0 = _mm256_setzero_ps();
      __m256 acc1 = _mm256_setzero_ps();
      int64_t i = 0;
      for (; i + 16 <= k; i += 16) {
        const __m256 w0 = is_f16 ? load_f16x8(h + i) : load_bf16x8(h + i);
        const __m256 w1 = is_f16 ? load_f16x8(h + i + 8) : load_bf16x8(h + i + 8);
        acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), acc1);
      }
      float sum = hsum(_mm256_add_ps(acc0, acc1));
      for (; i < k; ++i) {
        const float w = is_f16 ? _cvtsh_ss(h[i]) : load_bf16(h[i]);
        sum += w * x[i];
      }
      return sum;
    }
    case RowFormat::kQ8_0:
      return dot_blocks<RowFormat::kQ8_0>(static_cast<const uint8_t*>(row), x, k / 32);
    case RowFormat::kQ4_0:
      return dot_blocks<RowFormat::kQ4_0>(static_cast<const uint8_t*>(row), x, k / 32);
    case RowFormat::kQ4_1:
      return dot_blocks<RowFormat::kQ4_1>(static_cast<const uint8_t*>(row), x, k / 32);
    case RowFormat::kQ5_0:
      return dot_blocks<RowFormat::kQ5_0>(static_cast<const uint8_t*>(row), x, k / 32);
    case RowFormat::kQ5_1:
      return dot_blocks<RowFormat::kQ5_1>(static_cast<const uint8_t*>(row), x, k / 32);
    case RowFormat::kQ4_K:
    case RowFormat::kQ5_K:
    case RowFormat::kQ6_K:
      return dot_row_kquant_avx2(format, row, x, k);
    case RowFormat::kQ2_K:
    case RowFormat::kQ3_K:
    case RowFormat::kIQ4_NL:
    case RowFormat::kIQ4_XS:
      return dot_row_lowbit_avx2(format, row, x, k);
    case RowFormat::kNF4:
    case RowFormat::kFP4:
      return dot_row_bnb4_avx2(format, row, x, k);
    case RowFormat::kQ4_Z128:
      return dot_row_q4_z128(row, x, k);
  }
  return 0.0f;
}

}  // namespace

void add_avx2_kernels(IsaKernels& kernels) {
  kernels.dequantize_row = dequantize_row;
  kernels.dot_row = dot_row;
  kernels.quantize_row_q8_act = quantize_row_q8_act_avx2;
  kernels.dot_row_q8 = dot_row_q8_avx2;
  kernels.dot_rows_q8 = dot_rows_q8_avx2;
  kernels.int8_interleaved_prepare = int8_interleaved_prepare_avx2;
  kernels.int8_interleaved_gemm = int8_interleaved_gemm_avx2;
}

}  // namespace lm::kernels

#else  // No AVX2 in this build: isa_supported(kAvx2) is false on such targets, so never used.

namespace lm::kernels {
void add_avx2_kernels(IsaKernels&) {}
}  // namespace lm::kernels

#endif
