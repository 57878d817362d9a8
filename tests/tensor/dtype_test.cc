#include <gtest/gtest.h>

#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace lm {
namespace {

TEST(DType, BytesRespectBlocks) {
  EXPECT_EQ(dtype_bytes(DType::kF32, 10), 40u);
  EXPECT_EQ(dtype_bytes(DType::kQ4_0, 64), 36u);
  EXPECT_EQ(dtype_bytes(DType::kQ4_1, 32), 20u);
  EXPECT_EQ(dtype_bytes(DType::kQ6_K, 256), 210u);
  EXPECT_FALSE(dtype_bytes(DType::kQ8_0, 33).has_value());
  EXPECT_FALSE(dtype_bytes(DType::kF32, ~0ull).has_value());
}

TEST(Tensor, RowBytesAndShape) {
  Tensor t{DType::kQ8_0, {4, 64}, nullptr, Device::kCpu};
  EXPECT_EQ(t.row_bytes(), 68);
  EXPECT_EQ(t.numel(), 256);
  EXPECT_EQ(shape_string(t.shape), "[4, 64]");
  Buffer b({3, 5});
  EXPECT_EQ(b.numel(), 15);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.f32()) % 64, 0u);
}

}  // namespace
}  // namespace lm
