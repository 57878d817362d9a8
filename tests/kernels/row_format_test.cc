// Row formats: GGML block layout and quantizer semantics on hand-built blocks, round-trip error
// bounds, and every ISA's dequantize_row / dot_row against the scalar reference.
#include "kernels/cpu/row_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "base/fp16.h"
#include "kernel_test_util.h"

namespace lm::kernels {
namespace {

using testing::random_floats;
using testing::supported_isas;

constexpr RowFormat kAllFormats[] = {RowFormat::kF32,  RowFormat::kF16,  RowFormat::kBF16,
                                     RowFormat::kQ8_0, RowFormat::kQ4_0, RowFormat::kQ4_1,
                                     RowFormat::kQ5_0, RowFormat::kQ5_1};

bool is_quantized(RowFormat f) { return row_format_info(f).block_size > 1; }

// Encodes k floats in `format` with the reference converters.
std::vector<uint8_t> encode(RowFormat format, const std::vector<float>& x) {
  const int64_t k = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(static_cast<size_t>(row_bytes(format, k)));
  switch (format) {
    case RowFormat::kF32:
      std::memcpy(out.data(), x.data(), out.size());
      break;
    case RowFormat::kF16:
    case RowFormat::kBF16:
      for (int64_t i = 0; i < k; ++i) {
        const uint16_t h = format == RowFormat::kF16 ? fp32_to_fp16(x[i]) : fp32_to_bf16(x[i]);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      break;
    case RowFormat::kQ8_0:
      quantize_row_q8_0(x.data(), out.data(), k);
      break;
    case RowFormat::kQ4_0:
      quantize_row_q4_0(x.data(), out.data(), k);
      break;
    case RowFormat::kQ4_1:
      quantize_row_q4_1(x.data(), out.data(), k);
      break;
    case RowFormat::kQ5_0:
      quantize_row_q5_0(x.data(), out.data(), k);
      break;
    case RowFormat::kQ5_1:
      quantize_row_q5_1(x.data(), out.data(), k);
      break;
    case RowFormat::kNF4:
      quantize_row_nf4(x.data(), out.data(), k);
      break;
    case RowFormat::kFP4:
      quantize_row_fp4(x.data(), out.data(), k);
      break;
    case RowFormat::kQ4_Z128:
      quantize_row_q4_z128(x.data(), out.data(), k);
      break;
    case RowFormat::kQ4_K:
    case RowFormat::kQ5_K:
    case RowFormat::kQ6_K:
    case RowFormat::kQ2_K:
    case RowFormat::kQ3_K:
    case RowFormat::kIQ4_NL:
    case RowFormat::kIQ4_XS:
      ADD_FAILURE() << "no K-quant / low-bit quantizer: kquant_test.cc and lowbit_quant_test.cc "
                       "use random blocks";
      break;
  }
  return out;
}

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

TEST(RowFormat, GeometryMatchesGgml) {
  EXPECT_EQ(row_bytes(RowFormat::kF32, 7), 28);
  EXPECT_EQ(row_bytes(RowFormat::kF16, 7), 14);
  EXPECT_EQ(row_bytes(RowFormat::kBF16, 576), 1152);
  EXPECT_EQ(row_bytes(RowFormat::kQ8_0, 64), 68);
  EXPECT_EQ(row_bytes(RowFormat::kQ4_0, 576), 18 * 18);
  EXPECT_EQ(row_bytes(RowFormat::kQ4_1, 576), 18 * 20);
  EXPECT_STREQ(row_format_info(RowFormat::kQ4_1).name, "q4_1");
}

TEST(RowFormat, Q4NibbleOrderLowIsFirstHalf) {
  // Hand-built blocks: d = 1 (and m = 0.5 for Q4_1); byte i holds element i low, i + 16 high.
  uint8_t q4_0[18];
  uint8_t q4_1[20];
  const uint16_t one = fp32_to_fp16(1.0f);
  const uint16_t half = fp32_to_fp16(0.5f);
  std::memcpy(q4_0, &one, 2);
  std::memcpy(q4_1, &one, 2);
  std::memcpy(q4_1 + 2, &half, 2);
  for (int i = 0; i < 16; ++i) {
    const auto byte = static_cast<uint8_t>(i | ((15 - i) << 4));
    q4_0[2 + i] = byte;
    q4_1[4 + i] = byte;
  }
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    float out0[32];
    float out1[32];
    dequantize_row(RowFormat::kQ4_0, q4_0, out0, 32, isa);
    dequantize_row(RowFormat::kQ4_1, q4_1, out1, 32, isa);
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(out0[i], static_cast<float>(i - 8));
      EXPECT_EQ(out0[i + 16], static_cast<float>(7 - i));
      EXPECT_EQ(out1[i], static_cast<float>(i) + 0.5f);
      EXPECT_EQ(out1[i + 16], static_cast<float>(15 - i) + 0.5f);
    }
  }
}

TEST(RowFormat, Q8_0QuantizerIsGgmlReference) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16) * 0.25f;  // amax 4 at i = 0
  const auto block = encode(RowFormat::kQ8_0, x);
  const float d = 4.0f / 127.0f;
  EXPECT_EQ(f16_at(block.data()), fp16_to_fp32(fp32_to_fp16(d)));
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(static_cast<int8_t>(block[2 + i]), static_cast<int>(std::round(x[i] * (1.0f / d))))
        << i;
  }
  EXPECT_EQ(static_cast<int8_t>(block[2]), -127);
}

TEST(RowFormat, Q4_0QuantizerMapsSignedMaxToMinusEight) {
  // Largest magnitude is -4: d = -4 / -8 = 0.5, and multiples of 0.5 in [-4, 3.5] are exact.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i % 16 - 8) * 0.5f;
  auto block = encode(RowFormat::kQ4_0, x);
  EXPECT_EQ(f16_at(block.data()), 0.5f);
  EXPECT_EQ(block[2] & 0x0f, 0);  // -4 -> nibble 0
  float out[32];
  dequantize_row(RowFormat::kQ4_0, block.data(), out, 32, Isa::kScalar);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], x[i]) << i;

  // Largest magnitude positive: d is negative and that value still lands on nibble 0 exactly.
  x.assign(32, 0.0f);
  x[5] = 4.0f;
  x[20] = -1.0f;
  block = encode(RowFormat::kQ4_0, x);
  EXPECT_EQ(f16_at(block.data()), -0.5f);
  dequantize_row(RowFormat::kQ4_0, block.data(), out, 32, Isa::kScalar);
  EXPECT_EQ(out[5], 4.0f);
  EXPECT_EQ(out[20], -1.0f);
  EXPECT_EQ(out[0], 0.0f);
}

TEST(RowFormat, Q4_1QuantizerUsesMinAndRange) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = -2.0f + static_cast<float>(i % 16) * 0.25f;  // [-2, 1.75]
  const auto block = encode(RowFormat::kQ4_1, x);
  EXPECT_EQ(f16_at(block.data()), 0.25f);
  EXPECT_EQ(f16_at(block.data() + 2), -2.0f);
  float out[32];
  dequantize_row(RowFormat::kQ4_1, block.data(), out, 32, Isa::kScalar);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], x[i]) << i;
  EXPECT_EQ(block[4 + 15] >> 4, 15);  // the max hits the top nibble, clamped not wrapped
}

TEST(RowFormat, RoundTripErrorWithinHalfStep) {
  const auto x = random_floats(4096, 7, -3.0f, 3.0f);
  for (RowFormat format :
       {RowFormat::kQ8_0, RowFormat::kQ4_0, RowFormat::kQ4_1, RowFormat::kQ5_0, RowFormat::kQ5_1}) {
    SCOPED_TRACE(row_format_info(format).name);
    const auto bytes = encode(format, x);
    std::vector<float> out(x.size());
    dequantize_row(format, bytes.data(), out.data(), 4096, Isa::kScalar);
    const int64_t block_bytes = row_format_info(format).block_bytes;
    for (int64_t i = 0; i < 4096; ++i) {
      const uint8_t* block = bytes.data() + (i / 32) * block_bytes;
      const float step = std::fabs(f16_at(block));
      // Half a step, plus the fp16 rounding of d (times up to 127) and of m. Q4_0 and Q5_0 clamp
      // the side opposite their signed max at the top value, which can cost a whole step.
      const double steps = format == RowFormat::kQ4_0 || format == RowFormat::kQ5_0 ? 1.0 : 0.5;
      const double bound = step * (steps + 127.0 / 1024.0) + 3.0 / 1024.0 + 1e-6;
      EXPECT_NEAR(out[i], x[i], bound) << i;
    }
  }
}

TEST(RowFormat, DequantizeEveryIsaMatchesScalar) {
  for (RowFormat format : kAllFormats) {
    for (int64_t k : {1, 7, 32, 33, 64, 96, 4128}) {
      if (is_quantized(format) && k % 32 != 0) continue;
      const auto x = random_floats(k, 11, -2.0f, 2.0f);
      const auto bytes = encode(format, x);
      std::vector<float> expected(static_cast<size_t>(k));
      dequantize_row(format, bytes.data(), expected.data(), k, Isa::kScalar);
      for (Isa isa : supported_isas()) {
        SCOPED_TRACE(std::string(row_format_info(format).name) + " " + isa_name(isa) +
                     " k=" + std::to_string(k));
        std::vector<float> out(static_cast<size_t>(k), -99.0f);
        dequantize_row(format, bytes.data(), out.data(), k, isa);
        // Q4_1's q * d + m may be one fused rounding instead of two.
        for (int64_t i = 0; i < k; ++i) EXPECT_NEAR(out[i], expected[i], 1e-6) << i;
      }
    }
  }
}

TEST(RowFormat, DotRowEveryIsaMatchesDequantizedReference) {
  for (RowFormat format : kAllFormats) {
    for (int64_t k : {1, 7, 32, 33, 64, 96, 4128}) {
      if (is_quantized(format) && k % 32 != 0) continue;
      const auto w = random_floats(k, 21);
      const auto x = random_floats(k, 22);
      const auto bytes = encode(format, w);
      std::vector<float> w_deq(static_cast<size_t>(k));
      dequantize_row(format, bytes.data(), w_deq.data(), k, Isa::kScalar);
      const double expected = testing::dot_double(w_deq.data(), x.data(), k);
      const double bound = 2e-5 * testing::abs_dot_double(w_deq.data(), x.data(), k) + 1e-6;
      for (Isa isa : supported_isas()) {
        SCOPED_TRACE(std::string(row_format_info(format).name) + " " + isa_name(isa) +
                     " k=" + std::to_string(k));
        EXPECT_NEAR(dot_row(format, bytes.data(), x.data(), k, isa), expected, bound);
      }
    }
  }
}

}  // namespace
}  // namespace lm::kernels
