// The repack of integers-times-scales weights into the smallest exact block format, on weights
// built directly (quantized_checkpoint_test.cc covers the same through each format's packs):
// Q4_Z128's zero point is each block's own, not the checkpoint's, and the cases it cannot hold
// fall back to GGML's blocks.
#include "loader/integer_linear.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/fp16.h"

namespace lm {
namespace {

// rows x cols with one group a row (scale 0.5 for row n: n + 1 halves) and q from `value`.
template <typename Value>
IntegerLinear linear(int64_t rows, int64_t cols, Value value) {
  IntegerLinear w;
  w.rows = rows;
  w.cols = cols;
  w.num_groups = 1;
  w.group_of_col.assign(static_cast<size_t>(cols), 0);
  for (int64_t n = 0; n < rows; ++n) {
    w.scales.push_back(0.5f * static_cast<float>(n + 1));
    for (int64_t k = 0; k < cols; ++k) w.q.push_back(static_cast<int16_t>(value(n, k)));
  }
  return w;
}

TEST(IntegerLinear, Q4Z128TakesEachBlocksOwnZeroPoint) {
  // Every value in [3, 12]: the block's zero point is 0 (nibble = q), whatever the checkpoint's.
  const IntegerLinear w = linear(8, 256, [](int64_t n, int64_t k) { return 3 + (n + k) % 10; });
  auto r = repack_integer_linear(w, "m");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->weight.dtype, DType::kQ4_Z128);
  const auto* row = static_cast<const uint8_t*>(r->weight.data) + 5 * r->weight.row_bytes();
  uint16_t d;
  std::memcpy(&d, row + 68, 2);
  EXPECT_EQ(fp16_to_fp32(d), 3.0f);  // row 5's scale, block 1
  EXPECT_EQ(row[68 + 2], 0);         // z
  // Element 128 + 32 + 17 of row 5: the high nibble of byte 16 + 1 of block 1's nibbles.
  EXPECT_EQ(row[68 + 4 + 16 + 1] >> 4, 3 + (5 + 128 + 32 + 17) % 10);
}

TEST(IntegerLinear, BlocksQ4Z128CannotHoldTakeGgmlsBlocks) {
  // A block spanning 31 levels (-15 .. 15): no nibble zero point, Q5_0.
  const IntegerLinear wide = linear(8, 128, [](int64_t, int64_t k) { return k % 31 - 15; });
  auto r = repack_integer_linear(wide, "m");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->weight.dtype, DType::kQ5_0);
  // 12 rows (not a multiple of 8): Q4_0 for symmetric values.
  const IntegerLinear odd = linear(12, 128, [](int64_t n, int64_t k) { return (n + k) % 16 - 8; });
  r = repack_integer_linear(odd, "m");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->weight.dtype, DType::kQ4_0);
  // The same values on 16 rows: Q4_Z128.
  const IntegerLinear even = linear(16, 128, [](int64_t n, int64_t k) { return (n + k) % 16 - 8; });
  r = repack_integer_linear(even, "m");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->weight.dtype, DType::kQ4_Z128);
  // 8-bit values: Q8_0.
  const IntegerLinear eight = linear(8, 128, [](int64_t, int64_t k) { return k - 64; });
  r = repack_integer_linear(eight, "m");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->weight.dtype, DType::kQ8_0);
}

}  // namespace
}  // namespace lm
