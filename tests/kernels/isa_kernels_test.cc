// Per-ISA fp32 inner loops (dot, axpy, scale, GEMM tile) against double-precision references,
// on sizes that exercise every vector tail.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"
#include "kernels/cpu/int8_interleaved.h"
#include "kernels/cpu/isa.h"

namespace lm::kernels {
namespace {

using testing::random_floats;
using testing::supported_isas;

TEST(Isa, DetectedIsSupportedAndScalarAlwaysIs) {
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_TRUE(isa_supported(detected_isa()));
  EXPECT_TRUE(isa_supported(best_isa()));
  if (isa_supported(Isa::kAvx512Bf16)) {
    EXPECT_EQ(detected_isa(), Isa::kAvx512Bf16);
  } else if (isa_supported(Isa::kAvx512Vnni)) {
    EXPECT_EQ(detected_isa(), Isa::kAvx512Vnni);
  } else if (isa_supported(Isa::kAvx512)) {
    EXPECT_EQ(detected_isa(), Isa::kAvx512);
  } else if (isa_supported(Isa::kAvxVnni)) {
    EXPECT_EQ(detected_isa(), Isa::kAvxVnni);
  } else if (isa_supported(Isa::kAvx2)) {
    EXPECT_EQ(detected_isa(), Isa::kAvx2);
  }
}

// Each vector table starts as a copy of the one below it (isa.cc), so an op its ISA forgot to
// register would quietly run the reference: every entry of the scalar table must be replaced,
// but those only a higher level's kernels need (bf16_pairs_of, for avx512-bf16's pair GEMM).
TEST(IsaKernels, VectorTablesReplaceEveryReferenceEntry) {
  const IsaKernels& reference = isa_kernels(Isa::kScalar);
  for (Isa isa : supported_isas()) {
    if (isa == Isa::kScalar) continue;
    SCOPED_TRACE(isa_name(isa));
    const IsaKernels& kernels = isa_kernels(isa);
    EXPECT_NE(kernels.dot_f32, reference.dot_f32);
    EXPECT_NE(kernels.axpy_f32, reference.axpy_f32);
    EXPECT_NE(kernels.scale_f32, reference.scale_f32);
    EXPECT_NE(kernels.dequantize_row, reference.dequantize_row);
    EXPECT_NE(kernels.dot_row, reference.dot_row);
    EXPECT_NE(kernels.gemm_tile, reference.gemm_tile);
    EXPECT_NE(kernels.silu_mul, reference.silu_mul);
    EXPECT_NE(kernels.gelu_tanh_mul, reference.gelu_tanh_mul);
    EXPECT_NE(kernels.sum_exp, reference.sum_exp);
    EXPECT_NE(kernels.sanitize_scores, reference.sanitize_scores);
    EXPECT_NE(kernels.first_max, reference.first_max);
    EXPECT_NE(kernels.quantize_row_q8_act, reference.quantize_row_q8_act);
    EXPECT_NE(kernels.dot_row_q8, reference.dot_row_q8);
    EXPECT_NE(kernels.dot_rows_q8, reference.dot_rows_q8);
    EXPECT_NE(kernels.attend_rows, reference.attend_rows);
    EXPECT_NE(kernels.panel16_dot, reference.panel16_dot);
    EXPECT_NE(kernels.panel16_unpack, reference.panel16_unpack);
    EXPECT_NE(kernels.panel16_gemm, reference.panel16_gemm);
    EXPECT_NE(kernels.panel16_direct_gemm, reference.panel16_direct_gemm);
    EXPECT_GT(kernels.panel16_direct_max_rows, 0);
    EXPECT_NE(kernels.attend_scores, nullptr);
    EXPECT_NE(kernels.attend_values, nullptr);
    // The panel GEMM comes with 16-lane registers (kPanelWidth).
    EXPECT_EQ(kernels.gemm_panel != nullptr, isa >= Isa::kAvx512);
    EXPECT_EQ(kernels.bf16_pairs_of != reference.bf16_pairs_of, isa >= Isa::kAvx512Bf16);
  }
}

// avx-vnni is AVX2's table with its own interleaved int8 GEMM (vpdpbusd), the encoding the CPU
// runs: AVX-VNNI's where it has it, else AVX512-VNNI + VL's.
TEST(IsaKernels, AvxVnniIsAvx2WithItsOwnInterleavedGemm) {
  if (!isa_supported(Isa::kAvxVnni)) GTEST_SKIP() << "this CPU has no 256-bit vpdpbusd";
  const IsaKernels& avx2 = isa_kernels(Isa::kAvx2);
  const IsaKernels& vnni256 = isa_kernels(Isa::kAvxVnni);
  EXPECT_NE(vnni256.int8_interleaved_gemm, avx2.int8_interleaved_gemm);
  EXPECT_EQ(vnni256.int8_interleaved_gemm, has_avx_vnni_vex(read_cpu_id())
                                               ? int8_interleaved_gemm_avx_vnni
                                               : int8_interleaved_gemm_avx_vnni_evex);
  EXPECT_EQ(vnni256.int8_interleaved_prepare, avx2.int8_interleaved_prepare);
  EXPECT_EQ(vnni256.dot_row, avx2.dot_row);
  EXPECT_EQ(vnni256.panel16_gemm, avx2.panel16_gemm);
}

TEST(IsaKernels, DotAxpyScaleMatchReference) {
  for (Isa isa : supported_isas()) {
    const IsaKernels& kernels = isa_kernels(isa);
    for (int64_t n : {0, 1, 7, 8, 9, 31, 32, 33, 100, 4128}) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " n=" + std::to_string(n));
      const auto a = random_floats(n, 1);
      const auto b = random_floats(n, 2);
      const double expected = testing::dot_double(a.data(), b.data(), n);
      const double bound = 1e-5 * testing::abs_dot_double(a.data(), b.data(), n) + 1e-7;
      EXPECT_NEAR(kernels.dot_f32(a.data(), b.data(), n), expected, bound);

      auto y = b;
      kernels.axpy_f32(0.75f, a.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], b[i] + 0.75 * a[i], 1e-6);

      y = b;
      kernels.scale_f32(-1.5f, y.data(), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], b[i] * -1.5f);
    }
  }
}

TEST(IsaKernels, GemmPanelMatchesReferenceAndLeavesOtherColumnsAlone) {
  for (Isa isa : supported_isas()) {
    const IsaKernels& kernels = isa_kernels(isa);
    if (kernels.gemm_panel == nullptr) continue;  // this table keeps gemm_tile
    for (int64_t m : {1, 3, 4, 12, 13, 29}) {
      for (int64_t nc : {1, 7, 16}) {
        for (int64_t k : {1, 13, 100}) {
          SCOPED_TRACE(std::string(isa_name(isa)) + " m=" + std::to_string(m) +
                       " nc=" + std::to_string(nc) + " k=" + std::to_string(k));
          const int64_t ldx = k + 3, ldy = kPanelWidth + 5;
          const auto x = random_floats(m * ldx, 5);
          // Column c of the panel is weight row c: panel[p * kPanelWidth + c].
          const auto panel = random_floats(k * kPanelWidth, 6);
          std::vector<float> y(static_cast<size_t>(m * ldy), 123.0f);
          kernels.gemm_panel(x.data(), ldx, m, panel.data(), nc, k, y.data(), ldy);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t c = 0; c < ldy; ++c) {
              if (c >= nc) {
                ASSERT_EQ(y[i * ldy + c], 123.0f);  // past nc: untouched
                continue;
              }
              double expected = 0.0, bound = 0.0;
              for (int64_t p = 0; p < k; ++p) {
                const double term =
                    static_cast<double>(x[i * ldx + p]) * panel[p * kPanelWidth + c];
                expected += term;
                bound += std::abs(term);
              }
              ASSERT_NEAR(y[i * ldy + c], expected, 1e-5 * bound + 1e-7);
            }
          }
        }
      }
    }
  }
}

TEST(IsaKernels, GemmTileMatchesReference) {
  for (Isa isa : supported_isas()) {
    const IsaKernels& kernels = isa_kernels(isa);
    for (int64_t m : {1, 3, 4, 5, 9}) {
      for (int64_t n : {1, 2, 3, 7}) {
        for (int64_t k : {1, 8, 13, 96}) {
          SCOPED_TRACE(std::string(isa_name(isa)) + " m=" + std::to_string(m) +
                       " n=" + std::to_string(n) + " k=" + std::to_string(k));
          // Padded leading dimensions catch a kernel that assumes ld == k.
          const int64_t ldx = k + 3, ldw = k + 5, ldy = n + 2;
          const auto x = random_floats(m * ldx, 3);
          const auto w = random_floats(n * ldw, 4);
          std::vector<float> y(static_cast<size_t>(m * ldy), 123.0f);
          kernels.gemm_tile(x.data(), ldx, m, w.data(), ldw, n, k, y.data(), ldy);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < ldy; ++j) {
              if (j >= n) {
                EXPECT_EQ(y[i * ldy + j], 123.0f);  // outside the tile: untouched
                continue;
              }
              const float* xr = x.data() + i * ldx;
              const float* wr = w.data() + j * ldw;
              EXPECT_NEAR(y[i * ldy + j], testing::dot_double(xr, wr, k),
                          1e-5 * testing::abs_dot_double(xr, wr, k) + 1e-7);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace lm::kernels
