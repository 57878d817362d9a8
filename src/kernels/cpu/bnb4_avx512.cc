// AVX-512F dots over bitsandbytes' NF4 / FP4 rows (built with the avx512 flags; used only after
// cpuid says so): the 16-entry code book fits one register, so one vpermps looks up 16 values
// (AVX2 needs two and a blend for 8), and the even / odd elements of x are gathered to meet the
// high / low nibbles of bitsandbytes' byte order. Decode of NF4 rows is bound by these lookups.
// NOTE: as in kernels_avx2.cc, only internal-linkage helpers and intrinsics here.
#include "kernels/cpu/isa.h"

#if defined(__AVX512F__)

// GCC 12's AVX-512 intrinsics initialise their "undefined" vectors from themselves (GCC PR
// 105593), which -Wuninitialized reports at every use; the warning is about the header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/bnb4_blocks.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

// The table's dot_row before this file's, for every other format.
float (*g_next_dot_row)(RowFormat, const void*, const float*, int64_t) = nullptr;

float dot_row_bnb4(RowFormat format, const void* row, const float* x, int64_t k) {
  const __m512 book = _mm512_loadu_ps(format == RowFormat::kNF4 ? bnb4::kNF4Code : bnb4::kFP4Code);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i low4 = _mm512_set1_epi32(15);
  const auto* bytes = static_cast<const uint8_t*>(row);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < k / bnb4::kBlock; ++b, x += bnb4::kBlock) {
    const uint8_t* block = bytes + b * bnb4::kBlockBytes;
    __m512 sum = _mm512_setzero_ps();
    for (int half = 0; half < 2; ++half) {  // 16 bytes: values 32 half .. 32 half + 31
      const __m512i q = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + bnb4::kQsOffset + 16 * half)));
      const __m512 w_even = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), book);
      const __m512 w_odd = _mm512_permutexvar_ps(_mm512_and_si512(q, low4), book);
      const __m512 x0 = _mm512_loadu_ps(x + 32 * half);
      const __m512 x1 = _mm512_loadu_ps(x + 32 * half + 16);
      sum = _mm512_fmadd_ps(w_even, _mm512_permutex2var_ps(x0, even, x1), sum);
      sum = _mm512_fmadd_ps(w_odd, _mm512_permutex2var_ps(x0, odd, x1), sum);
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(bnb4::block_absmax(block)), sum, acc);
  }
  return _mm512_reduce_add_ps(acc);
}

float dot_row(RowFormat format, const void* row, const float* x, int64_t k) {
  if (is_bnb4(format)) return dot_row_bnb4(format, row, x, k);
  return g_next_dot_row(format, row, x, k);
}

}  // namespace

void add_avx512_bnb4_kernels(IsaKernels& kernels) {
  g_next_dot_row = kernels.dot_row;
  kernels.dot_row = dot_row;
}

}  // namespace lm::kernels

#pragma GCC diagnostic pop

#else  // no AVX-512 in this build: isa_supported(kAvx512) is false on such targets.

namespace lm::kernels {
void add_avx512_bnb4_kernels(IsaKernels&) {}
}  // namespace lm::kernels

#endif
