// FP8 weight panels (panels_fp8.h): the byte conversion against the formats' values, the weights
// (value times lane scale) against the same arithmetic written plainly, each ISA's decode and
// unpack kernels against the scalar reference bit for bit, and matmul_fp8_panels' batch invariance:
// a row's outputs the same bits alone or in any batch, decode or prefill, at every ISA level.
#include "kernels/cpu/panels_fp8.h"

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

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
        << "element " << i << ": " << got[i] << " vs " << want[i];
}

// A weight [n, k] in FP8 rows with a grid of scales, and its panels.
struct Fp8Case {
  Fp8Format format = Fp8Format::kE4M3;
  bool bf16_scales = false;
  int64_t n = 32, k = 64, block_rows = 1, block_cols = 64;
  uint32_t seed = 1;

  std::vector<uint8_t> rows, panels;
  std::vector<float> grid, lanes;
  int64_t grid_cols = 0;

  Fp8Panels make() {
    std::mt19937 rng(seed);
    rows.resize(static_cast<size_t>(n * k));
    for (uint8_t& b : rows) {
      do {
        b = static_cast<uint8_t>(rng());
      } while (format == Fp8Format::kE4M3 ? (b & 0x7f) == 0x7f : (b & 0x7c) == 0x7c);
    }
    grid_cols = (k + block_cols - 1) / block_cols;
    const int64_t grid_rows = (n + block_rows - 1) / block_rows;
    grid = random_floats(grid_rows * grid_cols, seed + 1, 1e-3f, 2e-2f);
    if (format == Fp8Format::kE5M2)  // E5M2 values reach 57344: keep weights moderate
      for (float& s : grid) s *= 1e-3f;
    if (bf16_scales)
      for (float& s : grid) s = bf16_to_fp32(fp32_to_bf16(s));
    lanes.resize(static_cast<size_t>(n / kPanel16Rows * grid_cols * kPanel16Rows));
    fp8_lane_scales(grid.data(), block_rows, grid_cols, n, format, lanes.data());
    panels.resize(rows.size());
    pack_fp8_panels(rows.data(), n, k, panels.data());
    return {format, panels.data(), lanes.data(), block_cols, grid_cols};
  }

  // Weight (j, p): its fp8 value times its grid scale, in fp32.
  float weight(int64_t j, int64_t p) const {
    const uint8_t b = rows[static_cast<size_t>(j * k + p)];
    const float v = format == Fp8Format::kE4M3 ? fp8_e4m3_to_fp32(b) : fp8_e5m2_to_fp32(b);
    const float s = grid[static_cast<size_t>(j / block_rows * grid_cols + p / block_cols)];
    return v * s;
  }
};

TEST(Fp8Panels, BytesConvertToTheFormatsValues) {
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    if ((b & 0x7f) != 0x7f) {
      EXPECT_EQ(fp16_to_fp32(fp8_as_fp16_bits(byte, Fp8Format::kE4M3)) * 256.0f,
                fp8_e4m3_to_fp32(byte))
          << b;
    }
    if ((b & 0x7c) != 0x7c) {
      EXPECT_EQ(fp16_to_fp32(fp8_as_fp16_bits(byte, Fp8Format::kE5M2)), fp8_e5m2_to_fp32(byte))
          << b;
    }
  }
}

// Both formats, per-row and 2-D block scales (blocks cut at the edges), scales that are bf16
// values (compressed-tensors') and fp32 ones (transformers' weight_scale_inv).
std::vector<Fp8Case> cases() {
  std::vector<Fp8Case> out;
  uint32_t seed = 5;
  for (Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    for (bool bf16_scales : {false, true}) {
      Fp8Case per_row;
      per_row.format = format;
      per_row.bf16_scales = bf16_scales;
      per_row.seed = seed++;
      out.push_back(per_row);
      Fp8Case blocks = per_row;  // 24 x 40 blocks over 48 x 100: cut rows and columns
      blocks.n = 48;
      blocks.k = 100;
      blocks.block_rows = 24;
      blocks.block_cols = 40;
      blocks.seed = seed++;
      out.push_back(blocks);
    }
  }
  return out;
}

std::string name_of(const Fp8Case& c) {
  return std::string(c.format == Fp8Format::kE4M3 ? "E4M3" : "E5M2") +
         (c.bf16_scales ? " bf16 scales" : " fp32 scales") + " n=" + std::to_string(c.n) +
         " k=" + std::to_string(c.k) + " blocks " + std::to_string(c.block_rows) + "x" +
         std::to_string(c.block_cols);
}

TEST(Fp8Panels, WeightsAreValueTimesScale) {
  for (Fp8Case c : cases()) {
    SCOPED_TRACE(name_of(c));
    const Fp8Panels w = c.make();
    for (int64_t j = 0; j < c.n; ++j)
      for (int64_t p = 0; p < c.k; ++p)
        ASSERT_EQ(fp8_panel_weight(w, c.k, j / kPanel16Rows, p, j % kPanel16Rows), c.weight(j, p))
            << j << "," << p;
  }
}

// The scalar decode reference is the plain FMA chain over the weights, and every ISA's decode
// and unpack kernels give the scalar reference's bits.
TEST(Fp8Panels, DotAndUnpackMatchTheReferenceBitsAtEveryIsa) {
  for (Fp8Case c : cases()) {
    SCOPED_TRACE(name_of(c));
    const Fp8Panels w = c.make();
    const int64_t num_panels = c.n / kPanel16Rows;
    for (int64_t m : {1, 2, 3, 4, 5, 7}) {
      const int64_t ldx = c.k + 3, ldy = c.n + 5;
      const auto x = random_floats(m * ldx, 12);
      std::vector<float> want(static_cast<size_t>(m * ldy), 7.0f);
      fp8_panel_dot_scalar(w, 0, num_panels, c.k, x.data(), ldx, m, want.data(), ldy);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          float acc = 0.0f;
          for (int64_t p = 0; p < c.k; ++p) acc = std::fma(x[i * ldx + p], c.weight(j, p), acc);
          ASSERT_EQ(want[i * ldy + j], acc) << i << "," << j;
        }
      }
      for (Isa isa : supported_isas()) {
        SCOPED_TRACE(isa_name(isa));
        std::vector<float> got(static_cast<size_t>(m * ldy), 7.0f);
        isa_kernels(isa).fp8_panel_dot(w, 0, num_panels, c.k, x.data(), ldx, m, got.data(), ldy);
        expect_same_bits(got, want);
        // A later panel alone.
        std::vector<float> last(static_cast<size_t>(m * ldy), 7.0f);
        isa_kernels(isa).fp8_panel_dot(w, num_panels - 1, 1, c.k, x.data(), ldx, m, last.data(),
                                       ldy);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t col = 0; col < kPanel16Rows; ++col)
            ASSERT_EQ(last[i * ldy + col], want[i * ldy + (num_panels - 1) * kPanel16Rows + col]);
      }
    }
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(isa_name(isa));
      for (int64_t g = 0; g < num_panels; ++g) {
        for (const auto& [p0, p1] :
             {std::pair<int64_t, int64_t>{0, c.k}, {3, 41}, {c.k - 1, c.k}}) {
          std::vector<float> got(static_cast<size_t>((p1 - p0) * kPanel16Rows));
          std::vector<float> want(got.size());
          isa_kernels(isa).fp8_panel_unpack(w, g, c.k, p0, p1, got.data());
          fp8_panel_unpack_scalar(w, g, c.k, p0, p1, want.data());
          expect_same_bits(got, want);
        }
      }
    }
  }
}

// matmul_fp8_panels: decode (few rows) and prefill (unpacked tiles through panel16_gemm) give
// each row the bits of that row alone, with or without a bias, at every ISA.
TEST(Fp8Panels, MatmulRowsAreTheSameBitsAloneOrInAnyBatch) {
  ThreadPool pool(2);
  for (Fp8Case c : cases()) {
    SCOPED_TRACE(name_of(c));
    const Fp8Panels w = c.make();
    const int64_t m = 37;
    const auto x = random_floats(m * c.k, 31);
    const auto bias = random_floats(c.n, 32);
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(isa_name(isa));
      std::vector<float> batch(static_cast<size_t>(m * c.n));
      matmul_fp8_panels(w, x.data(), batch.data(), m, c.n, c.k, pool, bias.data(), isa);
      for (int64_t i : {int64_t{0}, int64_t{17}, m - 1}) {
        std::vector<float> alone(static_cast<size_t>(c.n));
        matmul_fp8_panels(w, x.data() + i * c.k, alone.data(), 1, c.n, c.k, pool, bias.data(), isa);
        for (int64_t j = 0; j < c.n; ++j) {
          float acc = 0.0f;
          for (int64_t p = 0; p < c.k; ++p) acc = std::fma(x[i * c.k + p], c.weight(j, p), acc);
          ASSERT_EQ(alone[j], acc + bias[j]) << i << "," << j;
          ASSERT_EQ(batch[i * c.n + j], alone[j]) << i << "," << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace lm::kernels
