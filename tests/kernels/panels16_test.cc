// 16-bit weight panels (panels16.h): the layout and its packing, each ISA's panel kernels against
// the scalar reference bit for bit (every output one FMA chain over k in order), and
// matmul_panels16's batch invariance: a row's outputs are the same bits alone, in any batch,
// over any thread split, across the k-depth and row blocks of prefill, and at every ISA level.
#include "kernels/cpu/panels16.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/cpu/matmul.h"

namespace lm::kernels {
namespace {

using testing::random_floats;
using testing::supported_isas;

constexpr RowFormat kFormats[] = {RowFormat::kF16, RowFormat::kBF16};

uint16_t to_half(RowFormat format, float f) {
  return format == RowFormat::kF16 ? fp32_to_fp16(f) : fp32_to_bf16(f);
}

float from_half(RowFormat format, uint16_t h) {
  return format == RowFormat::kF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

std::vector<uint16_t> random_halves(RowFormat format, int64_t count, uint32_t seed) {
  const auto values = random_floats(count, seed);
  std::vector<uint16_t> h(values.size());
  for (size_t i = 0; i < values.size(); ++i) h[i] = to_half(format, values[i]);
  return h;
}

// n rows of k values packed into panels.
std::vector<uint16_t> panels_of(RowFormat format, const std::vector<uint16_t>& rows, int64_t n,
                                int64_t k) {
  std::vector<uint16_t> panels(rows.size());
  pack_panels16(format, rows.data(), 2 * k, n, k, panels.data());
  return panels;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
        << "element " << i << ": " << got[i] << " vs " << want[i];
}

TEST(Panels16, CanPanelOnlyWholePanelsOf16BitRows) {
  EXPECT_TRUE(can_panel16(RowFormat::kF16, 32, 7));
  EXPECT_TRUE(can_panel16(RowFormat::kBF16, 16, 1));
  EXPECT_FALSE(can_panel16(RowFormat::kF16, 24, 8));
  EXPECT_FALSE(can_panel16(RowFormat::kF32, 16, 8));
  EXPECT_FALSE(can_panel16(RowFormat::kQ8_0, 16, 32));
  EXPECT_FALSE(can_panel16(RowFormat::kF16, 16, 0));
}

TEST(Panels16, PackPutsRowValuesKMajorAndWorksInPlace) {
  const int64_t n = 32, k = 5, pad = 6;
  std::vector<uint8_t> rows(static_cast<size_t>(n * (2 * k + pad)), 0xee);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) {
      const auto v = static_cast<uint16_t>(j * 100 + p);
      std::memcpy(rows.data() + j * (2 * k + pad) + 2 * p, &v, 2);
    }
  }
  std::vector<uint16_t> panels(static_cast<size_t>(n * k));
  pack_panels16(RowFormat::kF16, rows.data(), 2 * k + pad, n, k, panels.data());
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) {
      const int64_t g = j / kPanel16Rows, c = j % kPanel16Rows;
      ASSERT_EQ(panels[static_cast<size_t>((g * k + p) * kPanel16Rows + c)], j * 100 + p);
    }
  }
  // In place, from unpadded rows.
  std::vector<uint16_t> in_place(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) in_place[static_cast<size_t>(j * k + p)] = j * 100 + p;
  }
  pack_panels16(RowFormat::kF16, in_place.data(), 2 * k, n, k, in_place.data());
  EXPECT_EQ(in_place, panels);
}

TEST(Panels16, RowLookupGivesTheRowsValues) {
  for (RowFormat format : kFormats) {
    const int64_t n = 48, k = 37;
    const auto rows = random_halves(format, n * k, 3);
    const auto panels = panels_of(format, rows, n, k);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t j : {0, 15, 16, 47}) {
      panel16_row(format, panels.data(), k, j, row.data());
      for (int64_t p = 0; p < k; ++p)
        ASSERT_EQ(row[p], from_half(format, rows[static_cast<size_t>(j * k + p)]));
    }
  }
}

// The reference's outputs are the double-precision dot within fp32 rounding (sanity), and every
// ISA's decode kernel gives the reference's bits, on panel counts around the groups it streams
// side by side (kPanel16DecodePanels for one row, 2 for 2-3 rows; panels of at least
// kPanel16SideBySideMinDepth values) and their remainders.
TEST(Panels16, DotMatchesReferenceBitsAtEveryIsa) {
  for (RowFormat format : kFormats) {
    for (int64_t num_panels : {int64_t{1}, int64_t{2}, int64_t{3}, kPanel16DecodePanels + 1,
                               2 * kPanel16DecodePanels + 3}) {
      for (int64_t k :
           {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{577}, kPanel16SideBySideMinDepth + 5}) {
        for (int64_t m : {1, 2, 3, 4, 5, 7}) {
          SCOPED_TRACE(std::string(row_format_info(format).name) +
                       " panels=" + std::to_string(num_panels) + " k=" + std::to_string(k) +
                       " m=" + std::to_string(m));
          const int64_t n = num_panels * kPanel16Rows, ldx = k + 3, ldy = n + 5;
          const auto rows = random_halves(format, n * k, 11);
          const auto panels = panels_of(format, rows, n, k);
          const auto x = random_floats(m * ldx, 12);
          std::vector<float> want(static_cast<size_t>(m * ldy), 7.0f);
          panel16_dot_scalar(format, panels.data(), num_panels, k, x.data(), ldx, m, want.data(),
                             ldy);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double expected = 0.0, bound = 0.0;
              for (int64_t p = 0; p < k; ++p) {
                const double term = static_cast<double>(x[i * ldx + p]) *
                                    from_half(format, rows[static_cast<size_t>(j * k + p)]);
                expected += term;
                bound += std::abs(term);
              }
              ASSERT_NEAR(want[i * ldy + j], expected, 1e-5 * bound + 1e-7);
            }
            for (int64_t j = n; j < ldy; ++j) ASSERT_EQ(want[i * ldy + j], 7.0f);
          }
          for (Isa isa : supported_isas()) {
            SCOPED_TRACE(isa_name(isa));
            std::vector<float> got(static_cast<size_t>(m * ldy), 7.0f);
            isa_kernels(isa).panel16_dot(format, panels.data(), num_panels, k, x.data(), ldx, m,
                                         got.data(), ldy);
            expect_same_bits(got, want);
          }
        }
      }
    }
  }
}

// The prefill tiles give the decode kernel's bits, at every ISA, for row counts around each
// register tile (6, 12 and 14 rows, 4, 2, 1) and panel counts around the two-panel tile: on 1-3
// panels unpacked a k range at a time and run by the fp32 GEMM over depth blocks (accumulating in
// y), and straight from the 16-bit values (panel16_direct_gemm).
TEST(Panels16, PrefillTilesGiveTheDotsBits) {
  for (RowFormat format : kFormats) {
    for (int64_t num_panels : {1, 2, 3}) {
      for (int64_t k : {1, 30, 300}) {
        for (int64_t m : {1, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 29}) {
          SCOPED_TRACE(std::string(row_format_info(format).name) +
                       " panels=" + std::to_string(num_panels) + " k=" + std::to_string(k) +
                       " m=" + std::to_string(m));
          const int64_t n = num_panels * kPanel16Rows, ldx = k + 1, ldy = n + 3;
          const auto rows = random_halves(format, n * k, 21);
          const auto panels = panels_of(format, rows, n, k);
          const auto x = random_floats(m * ldx, 22);
          std::vector<float> want(static_cast<size_t>(m * ldy), -1.0f);
          panel16_dot_scalar(format, panels.data(), num_panels, k, x.data(), ldx, m, want.data(),
                             ldy);
          // One panel's 16-bit values, for unpacking.
          auto panel = [&](int64_t g) { return panels.data() + g * k * kPanel16Rows; };
          for (Isa isa : supported_isas()) {
            SCOPED_TRACE(isa_name(isa));
            const IsaKernels& kernels = isa_kernels(isa);
            std::vector<float> got(static_cast<size_t>(m * ldy), -1.0f);
            std::vector<float> unpacked(static_cast<size_t>(n * k));
            for (int64_t p0 = 0; p0 < k; p0 += 7 * (1 + p0 % 3)) {  // uneven depth blocks
              const int64_t p1 = std::min(k, p0 + 7 * (1 + p0 % 3));
              const int64_t depth_elems = (p1 - p0) * kPanel16Rows;
              for (int64_t g = 0; g < num_panels; ++g) {
                kernels.panel16_unpack(format, panel(g), p0, p1, unpacked.data() + g * depth_elems);
                std::vector<float> reference(static_cast<size_t>(depth_elems));
                panel16_unpack_scalar(format, panel(g), p0, p1, reference.data());
                for (int64_t e = 0; e < depth_elems; ++e)
                  ASSERT_EQ(unpacked[g * depth_elems + e], reference[e]);
              }
              kernels.panel16_gemm(x.data() + p0, ldx, m, unpacked.data(), num_panels, p1 - p0,
                                   got.data(), ldy, p0 > 0);
            }
            expect_same_bits(got, want);
            std::vector<float> direct(static_cast<size_t>(m * ldy), -1.0f);
            kernels.panel16_direct_gemm(format, panels.data(), num_panels, k, x.data(), ldx, m,
                                        direct.data(), ldy);
            expect_same_bits(direct, want);
            std::vector<float> scalar(static_cast<size_t>(m * ldy), -1.0f);
            std::vector<float> whole(static_cast<size_t>(n * k));
            for (int64_t g = 0; g < num_panels; ++g)
              panel16_unpack_scalar(format, panel(g), 0, k, whole.data() + g * k * kPanel16Rows);
            panel16_gemm_scalar(x.data(), ldx, m, whole.data(), num_panels, k, scalar.data(), ldy,
                                false);
            expect_same_bits(scalar, want);
          }
        }
      }
    }
  }
}

// matmul_panels16: each row's outputs are the bits of that row run alone at the scalar level, at
// every ISA, for decode and prefill batch sizes (past the depth and row blocks), 1 and 2 threads.
TEST(Panels16, MatmulIsBatchInvariantAndTheSameBitsAtEveryIsa) {
  ThreadPool single(1);
  ThreadPool pair(2);
  for (RowFormat format : kFormats) {
    for (int64_t k : {40, 300, 1280}) {  // 1280: two depth blocks, X rows from a padded copy
      const int64_t n = 48;
      const auto rows = random_halves(format, n * k, 31);
      const auto panels = panels_of(format, rows, n, k);
      const auto bias = random_floats(n, 32);
      const int64_t max_m = 530;
      const auto x = random_floats(max_m * k, 33);
      std::vector<float> alone(static_cast<size_t>(max_m * n));
      for (int64_t i = 0; i < max_m; ++i)
        matmul_panels16(format, panels.data(), x.data() + i * k, alone.data() + i * n, 1, n, k,
                        single, bias.data(), Isa::kScalar);
      for (Isa isa : supported_isas()) {
        // 128 / 129: either side of the 16-lane tables' direct prefill (panel16_direct_max_rows).
        for (int64_t m : {1, 2, 5, 8, 13, 128, 129, 530}) {
          for (ThreadPool* pool : {&single, &pair}) {
            SCOPED_TRACE(std::string(row_format_info(format).name) + " " + isa_name(isa) +
                         " k=" + std::to_string(k) + " m=" + std::to_string(m) +
                         " threads=" + std::to_string(pool->num_threads()));
            std::vector<float> y(static_cast<size_t>(m * n));
            matmul_panels16(format, panels.data(), x.data(), y.data(), m, n, k, *pool, bias.data(),
                            isa);
            expect_same_bits(y, std::vector<float>(alone.begin(), alone.begin() + m * n));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace lm::kernels
