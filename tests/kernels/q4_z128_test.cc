// Q4_Z128 (q4_z128_blocks.h): the block layout and value rule on hand-built blocks, AutoAWQ's
// quantizer semantics, and the int8 dot at every level against the exact integer math. (The
// interleaved GEMM is covered with the other formats in int8_interleaved_test.cc, matmul in
// matmul_test.cc.)
#include "kernels/cpu/q4_z128_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "base/fp16.h"
#include "kernel_test_util.h"
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

using testing::random_floats;
using testing::supported_isas;

TEST(Q4Z128, IsBlocksOf128WithAScaleAndAZeroPoint) {
  EXPECT_EQ(row_format_info(RowFormat::kQ4_Z128).block_size, 128);
  EXPECT_EQ(row_bytes(RowFormat::kQ4_Z128, 256), 2 * 68);
  EXPECT_TRUE(supports_int8_dot(RowFormat::kQ4_Z128));
}

TEST(Q4Z128, ValueIsNibbleMinusZeroTimesScaleInQ4_0sNibbleOrder) {
  uint8_t block[68] = {};
  const uint16_t d = fp32_to_fp16(0.25f);
  std::memcpy(block, &d, 2);
  block[2] = 5;  // z
  // Sub-block 2: element 64 + 3 is qs[32 + 3]'s low nibble, element 64 + 19 its high one.
  block[4 + 32 + 3] = 0x9c;
  block[4 + 0] = 0x50;  // element 0: 0, element 16: 5
  std::vector<float> out(128);
  for (Isa isa : supported_isas()) {
    dequantize_row(RowFormat::kQ4_Z128, block, out.data(), 128, isa);
    EXPECT_EQ(out[64 + 3], (12 - 5) * 0.25f) << isa_name(isa);
    EXPECT_EQ(out[64 + 19], (9 - 5) * 0.25f);
    EXPECT_EQ(out[0], -5 * 0.25f);
    EXPECT_EQ(out[16], 0.0f);
    EXPECT_EQ(out[1], -5 * 0.25f);  // a zero nibble is -z
  }
}

TEST(Q4Z128, QuantizesAsAutoAwqDoes) {
  // One block of 0.1 * i - 3 (i < 128): min -3, max 9.7, so d = 12.7 / 15 (as fp16), z =
  // round(3 / d) = 4, and each value rounds to its nearest level.
  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i) x[i] = 0.1f * static_cast<float>(i) - 3.0f;
  uint8_t block[68];
  quantize_row_q4_z128(x.data(), block, 128);
  uint16_t h;
  std::memcpy(&h, block, 2);
  const float d = fp16_to_fp32(h);
  EXPECT_EQ(h, fp32_to_fp16(12.7f / 15.0f));
  EXPECT_EQ(block[2], 4);
  EXPECT_EQ(block[3], 0);
  std::vector<float> back(128);
  dequantize_row(RowFormat::kQ4_Z128, block, back.data(), 128, Isa::kScalar);
  for (int i = 0; i < 128; ++i) EXPECT_LE(std::abs(back[i] - x[i]), d / 2 + 1e-6f) << i;
  // A constant block: the range is floored at 1e-5 (d = 1e-5 / 15, an fp16 subnormal), so z
  // clamps to 0 and every value to the top level.
  std::vector<float> flat(128, 0.5f);
  quantize_row_q4_z128(flat.data(), block, 128);
  std::memcpy(&h, block, 2);
  EXPECT_EQ(h, fp32_to_fp16(1e-5f / 15.0f));
  EXPECT_EQ(block[2], 0);
  EXPECT_EQ(block[4], 0xff);
}

TEST(Q4Z128, Int8DotMatchesTheExactIntegerMathAtEveryLevel) {
  constexpr int64_t n = 9, k = 640, m = 5;
  const auto w = testing::quantized_weight_rows(RowFormat::kQ4_Z128, n, k, 23);
  const auto xq = testing::quantized_activation_rows(m, k, 29);
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> y(static_cast<size_t>(m * n));
    for (int64_t j = 0; j < n; ++j) {
      const uint8_t* row = w.data() + j * row_bytes(RowFormat::kQ4_Z128, k);
      dot_rows_q8(RowFormat::kQ4_Z128, row, xq.data(), k / 32, m, k, y.data() + j, n, isa);
      for (int64_t i = 0; i < m; ++i) {
        EXPECT_EQ(dot_row_q8(RowFormat::kQ4_Z128, row, xq.data() + i * k / 32, k, isa),
                  y[i * n + j]);
      }
    }
    testing::expect_exact_int8_math(RowFormat::kQ4_Z128, w, n, xq, m, k, y);
  }
}

// For readers without Q4_Z128 (the CUDA runner): exact Q8_0 for any row, Q4_0 where every value
// is a Q4_0 level.
TEST(Q4Z128, ReencodesExactlyIntoQ8_0AndWhereItFitsQ4_0) {
  constexpr int64_t n = 8, k = 512;
  const auto w = testing::quantized_weight_rows(RowFormat::kQ4_Z128, n, k, 37);
  const int64_t rb = row_bytes(RowFormat::kQ4_Z128, k);
  std::vector<float> ours(k), theirs(k);
  std::vector<uint8_t> q8(static_cast<size_t>(row_bytes(RowFormat::kQ8_0, k)));
  for (int64_t j = 0; j < n; ++j) {
    dequantize_row(RowFormat::kQ4_Z128, w.data() + j * rb, ours.data(), k, Isa::kScalar);
    q4_z128_to_ggml_row(RowFormat::kQ8_0, w.data() + j * rb, q8.data(), k);
    dequantize_row(RowFormat::kQ8_0, q8.data(), theirs.data(), k, Isa::kScalar);
    EXPECT_EQ(ours, theirs) << j;
  }
  // A symmetric row (z = 8, nibbles anywhere) and one with z = 3 whose nibbles stay in [0, 10]
  // fit Q4_0; z = 3 with a nibble of 11 (a level of +8) does not.
  std::vector<uint8_t> row(static_cast<size_t>(rb));
  for (int64_t b = 0; b < k / 128; ++b) {
    uint8_t* block = row.data() + b * 68;
    const uint16_t d = fp32_to_fp16(0.125f * static_cast<float>(b + 1));
    std::memcpy(block, &d, 2);
    block[2] = 8;
    block[3] = 0;
    for (int i = 0; i < 64; ++i) block[4 + i] = static_cast<uint8_t>((i * 37 + b) & 0xff);
  }
  EXPECT_TRUE(q4_z128_fits_q4_0(row.data(), k));
  std::vector<uint8_t> q4(static_cast<size_t>(row_bytes(RowFormat::kQ4_0, k)));
  q4_z128_to_ggml_row(RowFormat::kQ4_0, row.data(), q4.data(), k);
  dequantize_row(RowFormat::kQ4_Z128, row.data(), ours.data(), k, Isa::kScalar);
  dequantize_row(RowFormat::kQ4_0, q4.data(), theirs.data(), k, Isa::kScalar);
  EXPECT_EQ(ours, theirs);
  row[68 + 2] = 3;  // block 1
  for (int i = 0; i < 64; ++i) row[68 + 4 + i] = static_cast<uint8_t>((i % 11) | ((i % 7) << 4));
  EXPECT_TRUE(q4_z128_fits_q4_0(row.data(), k));
  row[68 + 4 + 5] = 0xb0;  // element 32 * 0 + 16 + 5 of block 1: nibble 11, level 8
  EXPECT_FALSE(q4_z128_fits_q4_0(row.data(), k));
}

TEST(Q4Z128, TestRowsUseEveryZeroPoint) {
  constexpr int64_t n = 8, k = 128 * 17;
  const auto w = testing::quantized_weight_rows(RowFormat::kQ4_Z128, n, k, 31);
  bool seen[16] = {};
  for (size_t b = 0; b < w.size(); b += 68) {
    ASSERT_LE(w[b + 2], 15);
    seen[w[b + 2]] = true;
  }
  for (int z = 0; z < 16; ++z) EXPECT_TRUE(seen[z]) << z;
}

}  // namespace
}  // namespace lm::kernels
