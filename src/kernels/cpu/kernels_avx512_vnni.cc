// AVX-512 VNNI int8 dots (built with -mavx512f/bw/vl/vnni; used only after cpuid says so): the
// AVX2 int8 kernels with maddubs + madd (two instructions, an int16 intermediate) replaced by one
// vpdpbusd (u8 x s8 summed straight into int32 lanes), on 256-bit registers so each GGML block of
// 32 is one instruction. Everything else comes from the AVX-512 table (isa.cc).
// NOTE: as in kernels_avx2.cc, nothing here may instantiate inline functions or templates with
// external linkage: only internal-linkage helpers and intrinsics.
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/int8_interleaved.h"
#include "kernels/cpu/int8_tiles.h"
#include "kernels/cpu/isa.h"

#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__F16C__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/int8_block_rows.h"

namespace lm::kernels {
namespace {

// u8 x s8 products into 8 int32 lanes in one instruction (AVX-512 VNNI on 256-bit registers).
struct DpbusdDot {
  static __m256i apply(__m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
  }
};

// Where the tiled GEMM takes the format, the dots are that GEMM with one weight row, so matmul
// (which uses it at every batch size) and these single dots give the same sums, bit for bit.
void dot_rows_q8_vnni(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t xq_stride,
                      int64_t m, int64_t k, float* out, int64_t out_stride) {
  if (const int64_t row_bytes = int8_tile_row_bytes_vnni(format, k); row_bytes > 0) {
    struct alignas(64) Line {
      uint8_t bytes[64];
    };
    thread_local std::vector<Line> prepared;
    prepared.resize(static_cast<size_t>(m * row_bytes / 64));
    int8_tile_prepare_vnni(format, xq, xq_stride, m, k, prepared.data());
    int8_tile_gemm_vnni(format, row, 0, 1, prepared.data(), m, k, out, out_stride);
    return;
  }
  if (!avx2::dot_rows_block_format<DpbusdDot>(format, row, xq, xq_stride, m, k, out, out_stride))
    dot_rows_q8_avx2(format, row, xq, xq_stride, m, k, out, out_stride);  // K-quants
}

float dot_row_q8_vnni(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k) {
  float out = 0.0f;
  dot_rows_q8_vnni(format, row, xq, 0, 1, k, &out, 1);
  return out;
}

}  // namespace

void add_avx512_vnni_kernels(IsaKernels& kernels) {
  kernels.dot_row_q8 = dot_row_q8_vnni;
  kernels.dot_rows_q8 = dot_rows_q8_vnni;
  kernels.int8_tile_row_bytes = int8_tile_row_bytes_vnni;
  kernels.int8_tile_prepare = int8_tile_prepare_vnni;
  kernels.int8_tile_gemm = int8_tile_gemm_vnni;
  // (int8_interleaved_prepare: the AVX2 table's, the same prepared bytes)
  kernels.int8_interleaved_gemm = int8_interleaved_gemm_vnni;
}

}  // namespace lm::kernels

#else  // No VNNI in this build: isa_supported(kAvx512Vnni) is false on such targets, never used.

namespace lm::kernels {
void add_avx512_vnni_kernels(IsaKernels&) {}
}  // namespace lm::kernels

#endif
