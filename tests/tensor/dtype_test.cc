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

// GGML's block geometry (gguf-py's GGML_QUANT_SIZES) of the low-bit formats.
TEST(DType, LowbitBlocks) {
  EXPECT_EQ(dtype_bytes(DType::kQ2_K, 512), 168u);
  EXPECT_EQ(dtype_bytes(DType::kQ3_K, 256), 110u);
  EXPECT_EQ(dtype_bytes(DType::kIQ4_NL, 64), 36u);
  EXPECT_EQ(dtype_bytes(DType::kIQ4_XS, 256), 136u);
  EXPECT_FALSE(dtype_bytes(DType::kIQ4_XS, 32).has_value());
  EXPECT_EQ(dtype_name(DType::kIQ4_NL), "IQ4_NL");
  EXPECT_EQ(dtype_name(DType::kI32), "I32");  // the table stays in enum order
  EXPECT_EQ(dtype_name(DType::kI8), "I8");
  EXPECT_EQ(dtype_name(DType::kI64), "I64");
  EXPECT_EQ(dtype_info(DType::kI64).block_bytes, 8);
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
