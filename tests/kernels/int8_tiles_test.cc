// The register-tiled int8 GEMM (AVX-512 VNNI): every tiled format against the exact integer math
// of the dequantized weights and quantized activations, on tile-edge shapes (m, n not multiples
// of 4), and batch invariance: a (weight row, activation row) result is the same bits whatever
// the tile shape, the batch, the position in it and the thread count.
#include "kernels/cpu/int8_tiles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernel_test_util.h"
#include "kernels/cpu/matmul.h"

namespace lm::kernels {
namespace {

using testing::random_floats;
constexpr auto weight_rows = testing::quantized_weight_rows;
constexpr auto quantized_rows = testing::quantized_activation_rows;

constexpr RowFormat kTiledFormats[] = {RowFormat::kQ8_0, RowFormat::kQ4_0, RowFormat::kQ4_1,
                                       RowFormat::kQ5_0, RowFormat::kQ5_1, RowFormat::kQ4_K,
                                       RowFormat::kQ5_K, RowFormat::kQ6_K};

struct alignas(64) Line {
  uint8_t bytes[64];
};

// y[m, n] through the tiled kernel directly.
std::vector<float> tiled(RowFormat format, const std::vector<uint8_t>& w, int64_t n,
                         const BlockQ8Act* xq, int64_t m, int64_t k) {
  const int64_t row_bytes_prepared = int8_tile_row_bytes_vnni(format, k);
  std::vector<Line> prepared(static_cast<size_t>(m * row_bytes_prepared / 64));
  int8_tile_prepare_vnni(format, xq, k / 32, m, k, prepared.data());
  std::vector<float> y(static_cast<size_t>(m * n), -1.0f);
  int8_tile_gemm_vnni(format, w.data(), row_bytes(format, k), n, prepared.data(), m, k, y.data(),
                      n);
  return y;
}

class Int8Tiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!isa_supported(Isa::kAvx512Vnni)) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  }
};

TEST_F(Int8Tiles, TakesTheBlockAndKQuantFormatsWhenKIsAMultipleOf64) {
  EXPECT_EQ(int8_tile_row_bytes_vnni(RowFormat::kQ8_0, 576), 9 * 192);
  EXPECT_EQ(int8_tile_row_bytes_vnni(RowFormat::kQ4_K, 256), 4 * 192);
  EXPECT_EQ(int8_tile_row_bytes_vnni(RowFormat::kQ4_0, 96), 0);  // k % 64 != 0
  EXPECT_EQ(int8_tile_row_bytes_vnni(RowFormat::kQ5_0, 64), 192);
  EXPECT_EQ(int8_tile_row_bytes_vnni(RowFormat::kF16, 64), 0);
}

TEST_F(Int8Tiles, EveryFormatMatchesTheExactIntegerMath) {
  for (RowFormat format : kTiledFormats) {
    for (int64_t k : {256, 768}) {
      constexpr int64_t m = 7, n = 11;
      SCOPED_TRACE(std::string(row_format_info(format).name) + " k=" + std::to_string(k));
      const auto w = weight_rows(format, n, k, 41);
      const auto xq = quantized_rows(m, k, 43);
      const auto y = tiled(format, w, n, xq.data(), m, k);
      testing::expect_exact_int8_math(format, w, n, xq, m, k, y);
    }
  }
}

TEST_F(Int8Tiles, ResultsDoNotDependOnTileShapeBatchOrPosition) {
  constexpr int64_t k = 512, n = 9, m = 11;
  for (RowFormat format : kTiledFormats) {
    SCOPED_TRACE(row_format_info(format).name);
    const auto w = weight_rows(format, n, k, 51);
    const auto xq = quantized_rows(m, k, 53);
    const auto whole = tiled(format, w, n, xq.data(), m, k);
    // Each activation row alone, each weight row alone, and odd sub-batches at odd offsets.
    for (int64_t i = 0; i < m; ++i) {
      const auto alone = tiled(format, w, n, xq.data() + i * k / 32, 1, k);
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(alone[j], whole[i * n + j]) << i << "," << j;
    }
    const int64_t rb = row_bytes(format, k);
    for (int64_t j = 0; j < n; ++j) {
      const std::vector<uint8_t> row(w.begin() + j * rb, w.begin() + (j + 1) * rb);
      const auto alone = tiled(format, row, 1, xq.data(), m, k);
      for (int64_t i = 0; i < m; ++i) ASSERT_EQ(alone[i], whole[i * n + j]) << i << "," << j;
    }
    const auto part = tiled(format, w, n, xq.data() + 3 * k / 32, 5, k);
    for (int64_t i = 0; i < 5; ++i) {
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(part[i * n + j], whole[(i + 3) * n + j]);
    }
  }
}

TEST_F(Int8Tiles, MatmulUsesTheTilesBatchInvariantlyOnAnyThreadCount) {
  ThreadPool one(1);
  ThreadPool two(2);
  constexpr int64_t k = 768, n = 37, m = 13;
  for (RowFormat format : kTiledFormats) {
    SCOPED_TRACE(row_format_info(format).name);
    const auto w = weight_rows(format, n, k, 61);
    const auto x = random_floats(m * k, 63);
    std::vector<float> batched(static_cast<size_t>(m * n));
    matmul(format, w.data(), row_bytes(format, k), x.data(), batched.data(), m, n, k, two, nullptr,
           Isa::kAvx512Vnni, /*quantize_activations=*/true);
    for (int64_t i = 0; i < m; ++i) {
      std::vector<float> single(static_cast<size_t>(n));
      matmul(format, w.data(), row_bytes(format, k), x.data() + i * k, single.data(), 1, n, k,
             i % 2 ? one : two, nullptr, Isa::kAvx512Vnni, true);
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(single[j], batched[i * n + j]) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace lm::kernels
