// The KV cache's element formats (kernels/cpu/kv_format.h) against torch's casts (fixture from
// scripts/fixtures/make_kv_format_references.py): every FP8 byte's value, and fp32 -> fp16 /
// bf16 / FP8 rounding (nearest, ties to even) of values across each format's range, ties and
// subnormals included; then what torch does not pin: saturation instead of inf/NaN, NaN kept,
// and every ISA's decoder giving the scalar one's values.
#include "kernels/cpu/kv_format.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernel_test_util.h"

namespace lm::kernels {
namespace {

nlohmann::json load_fixture() {
  std::ifstream in(LM_REPO_ROOT "/tests/fixtures/kv_formats/torch_casts.json");
  EXPECT_TRUE(in) << "missing fixture";
  return nlohmann::json::parse(in);
}

// The encoded bits of one element as an integer (fp16/bf16: 2 bytes, FP8: 1).
uint32_t encode_one(float x, KvFormat format) {
  uint16_t out = 0;
  encode_kv_row(&x, &out, 1, format);
  return format == KvFormat::kF8E4M3 || format == KvFormat::kF8E5M2 ? out & 0xffu : out;
}

float decode_one(uint32_t bits, KvFormat format) {
  const auto raw = static_cast<uint16_t>(bits);
  float out = 0.0f;
  decode_kv_row(scalar_kernels(), format, &raw, &out, 1);
  return out;
}

TEST(KvFormat, EveryFp8ByteDecodesToTorchsValue) {
  const auto fixture = load_fixture();
  for (auto [name, format] :
       {std::pair{"f8_e4m3", KvFormat::kF8E4M3}, std::pair{"f8_e5m2", KvFormat::kF8E5M2}}) {
    SCOPED_TRACE(name);
    const auto& values = fixture["fp8_values"][name];
    ASSERT_EQ(values.size(), 256u);
    for (uint32_t b = 0; b < 256; ++b) {
      const float ours = decode_one(b, format);
      EXPECT_EQ(std::bit_cast<uint32_t>(ours),
                std::bit_cast<uint32_t>(fp8_to_fp32(static_cast<uint8_t>(b), format)));
      const auto& expected = values[b];
      if (expected.is_null()) {
        EXPECT_TRUE(std::isnan(ours)) << "byte " << b;
      } else if (expected.is_string()) {
        EXPECT_EQ(ours, expected == "inf" ? INFINITY : -INFINITY) << "byte " << b;
      } else {
        // Bits, so that -0 and +0 differ.
        EXPECT_EQ(std::bit_cast<uint32_t>(ours), std::bit_cast<uint32_t>(expected.get<float>()))
            << "byte " << b;
      }
    }
  }
}

TEST(KvFormat, EncodingRoundsAsTorchCasts) {
  const auto fixture = load_fixture();
  for (auto [name, format] :
       {std::pair{"f16", KvFormat::kF16}, std::pair{"bf16", KvFormat::kBF16},
        std::pair{"f8_e4m3", KvFormat::kF8E4M3}, std::pair{"f8_e5m2", KvFormat::kF8E5M2}}) {
    SCOPED_TRACE(name);
    const auto& cast = fixture["casts"][name];
    const auto values = cast["values"].get<std::vector<float>>();
    const auto bits = cast["bits"].get<std::vector<uint32_t>>();
    ASSERT_EQ(values.size(), bits.size());
    ASSERT_GT(values.size(), 500u);
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(encode_one(values[i], format), bits[i]) << "value " << values[i];
    // A whole row encodes as its elements one by one.
    std::vector<uint8_t> row(values.size() * 2);
    encode_kv_row(values.data(), row.data(), static_cast<int64_t>(values.size()), format);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint32_t got = kv_element_bytes(format) == 1
                               ? row[i]
                               : static_cast<uint32_t>(row[2 * i] | (row[2 * i + 1] << 8));
      ASSERT_EQ(got, bits[i]) << "element " << i;
    }
  }
}

TEST(KvFormat, OutOfRangeValuesSaturateAndNanStaysNan) {
  const float huge = std::numeric_limits<float>::max();
  struct Limit {
    KvFormat format;
    float max_finite;
  };
  for (const Limit l : {Limit{KvFormat::kF16, 65504.0f}, Limit{KvFormat::kBF16, 3.3895314e38f},
                        Limit{KvFormat::kF8E4M3, 448.0f}, Limit{KvFormat::kF8E5M2, 57344.0f}}) {
    SCOPED_TRACE(static_cast<int>(l.format));
    for (float x : {l.max_finite * 1.01f, l.max_finite * 4.0f, huge, INFINITY}) {
      if (l.format == KvFormat::kBF16 && std::isinf(x)) continue;  // inf stays inf in bf16
      EXPECT_EQ(decode_one(encode_one(x, l.format), l.format), l.max_finite) << x;
      EXPECT_EQ(decode_one(encode_one(-x, l.format), l.format), -l.max_finite) << x;
    }
    EXPECT_TRUE(std::isnan(decode_one(encode_one(NAN, l.format), l.format)));
    // Values in range round trip through the largest finite value itself.
    EXPECT_EQ(decode_one(encode_one(l.max_finite, l.format), l.format), l.max_finite);
  }
}

TEST(KvFormat, EveryIsaDecodesAsTheScalarTable) {
  const auto values = testing::random_floats(1000, 7, -300.0f, 300.0f);
  for (KvFormat format : {KvFormat::kF16, KvFormat::kBF16, KvFormat::kF8E4M3, KvFormat::kF8E5M2}) {
    std::vector<uint8_t> encoded(values.size() * 2);
    encode_kv_row(values.data(), encoded.data(), static_cast<int64_t>(values.size()), format);
    std::vector<float> expected(values.size());
    decode_kv_row(scalar_kernels(), format, encoded.data(), expected.data(),
                  static_cast<int64_t>(values.size()));
    for (Isa isa : testing::supported_isas()) {
      SCOPED_TRACE(isa_name(isa));
      // Odd lengths: the vector loops' tails.
      for (int64_t n : {1, 7, 64, 999}) {
        std::vector<float> got(static_cast<size_t>(n));
        decode_kv_row(isa_kernels(isa), format, encoded.data(), got.data(), n);
        EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin()));
      }
    }
  }
}

}  // namespace
}  // namespace lm::kernels
