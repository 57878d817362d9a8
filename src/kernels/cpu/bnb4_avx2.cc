// AVX2 NF4 / FP4 kernels (built with -mavx2 -mfma -mf16c; used only after cpuid says so): eight
// 4-bit indices at a time looked up in the 16-entry code book held in two registers.
// NOTE: as in kernels_avx2.cc, only internal-linkage helpers and intrinsics here.
#include "kernels/cpu/bnb4_avx2.h"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/bnb4_blocks.h"

namespace lm::kernels {
namespace {

struct CodeBook {
  __m256 lo, hi;  // codes 0-7 and 8-15
};

CodeBook code_book(RowFormat format) {
  const float* code = format == RowFormat::kNF4 ? bnb4::kNF4Code : bnb4::kFP4Code;
  return {_mm256_loadu_ps(code), _mm256_loadu_ps(code + 8)};
}

// The codes of values 8j .. 8j+7 of a block: bytes qs[4j .. 4j+3], high nibble first.
__m256 codes(const CodeBook& book, const uint8_t* qs) {
  uint32_t word;
  std::memcpy(&word, qs, sizeof(word));
  const __m256i shifts = _mm256_setr_epi32(4, 0, 12, 8, 20, 16, 28, 24);
  const __m256i idx = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts), _mm256_set1_epi32(15));
  const __m256 low = _mm256_permutevar8x32_ps(book.lo, idx);
  const __m256 high = _mm256_permutevar8x32_ps(book.hi, idx);
  // Index bit 3 moved to the sign bit picks the upper half of the book.
  return _mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void dequantize_row_bnb4_avx2(RowFormat format, const void* src, float* dst, int64_t k) {
  const CodeBook book = code_book(format);
  const auto* bytes = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < k / bnb4::kBlock; ++b, dst += bnb4::kBlock) {
    const uint8_t* block = bytes + b * bnb4::kBlockBytes;
    const __m256 absmax = _mm256_set1_ps(bnb4::block_absmax(block));
    for (int j = 0; j < 8; ++j) {
      _mm256_storeu_ps(dst + 8 * j,
                       _mm256_mul_ps(codes(book, block + bnb4::kQsOffset + 4 * j), absmax));
    }
  }
}

float dot_row_bnb4_avx2(RowFormat format, const void* row, const float* x, int64_t k) {
  const CodeBook book = code_book(format);
  const auto* bytes = static_cast<const uint8_t*>(row);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / bnb4::kBlock; ++b, x += bnb4::kBlock) {
    const uint8_t* block = bytes + b * bnb4::kBlockBytes;
    const uint8_t* qs = block + bnb4::kQsOffset;
    // sum(code * absmax * x) = absmax * sum(code * x), two chains per block.
    __m256 s0 = _mm256_mul_ps(codes(book, qs), _mm256_loadu_ps(x));
    __m256 s1 = _mm256_mul_ps(codes(book, qs + 4), _mm256_loadu_ps(x + 8));
    for (int j = 2; j < 8; j += 2) {
      s0 = _mm256_fmadd_ps(codes(book, qs + 4 * j), _mm256_loadu_ps(x + 8 * j), s0);
      s1 = _mm256_fmadd_ps(codes(book, qs + 4 * j + 4), _mm256_loadu_ps(x + 8 * j + 8), s1);
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(bnb4::block_absmax(block)), _mm256_add_ps(s0, s1), acc);
  }
  return hsum(acc);
}

}  // namespace lm::kernels

#endif
