#include "kernels/cpu/kv_format.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

// An FP8 layout: 1 sign bit, kExponentBits, kMantissaBits. E4M3FN (OCP "fn": no infinities)
// spends only S.1111.111 on NaN, so its largest finite value is 1.75 * 2^8 = 448; E5M2 is IEEE
// style (exponent 31 is inf/NaN), largest finite 1.75 * 2^15 = 57344.
struct Fp8Layout {
  int exponent_bits;
  int mantissa_bits;
  uint8_t max_finite_bits;  // sign clear
  uint8_t nan_bits;         // sign clear
  // Derived (with_limits): the largest finite value, the smallest normal, and 2^(bias - 1 + m),
  // which counts a subnormal in its quanta.
  float max_finite = 0.0f;
  float min_normal = 0.0f;
  float subnormal_scale = 0.0f;
};

float decode_fp8(uint8_t bits, const Fp8Layout& l);

Fp8Layout with_limits(Fp8Layout l) {
  const int bias = (1 << (l.exponent_bits - 1)) - 1;
  l.max_finite = decode_fp8(l.max_finite_bits, l);
  l.min_normal = std::ldexp(1.0f, 1 - bias);
  l.subnormal_scale = std::ldexp(1.0f, bias - 1 + l.mantissa_bits);
  return l;
}

Fp8Layout layout_of(KvFormat format) {
  static const Fp8Layout kE4M3 = with_limits({4, 3, 0x7e, 0x7f, 0.0f, 0.0f, 0.0f});
  static const Fp8Layout kE5M2 = with_limits({5, 2, 0x7b, 0x7f, 0.0f, 0.0f, 0.0f});
  if (format == KvFormat::kF8E4M3) return kE4M3;
  LM_CHECK(format == KvFormat::kF8E5M2);
  return kE5M2;
}

float decode_fp8(uint8_t bits, const Fp8Layout& l) {
  const int bias = (1 << (l.exponent_bits - 1)) - 1;
  const bool negative = (bits & 0x80) != 0;
  const uint8_t magnitude = bits & 0x7f;
  if (magnitude == l.nan_bits || (l.exponent_bits == 5 && (magnitude >> l.mantissa_bits) == 31 &&
                                  (magnitude & ((1 << l.mantissa_bits) - 1)) != 0)) {
    return std::nanf("");
  }
  if (l.exponent_bits == 5 && magnitude == 0x7c) {
    return negative ? -INFINITY : INFINITY;
  }
  const int exponent = magnitude >> l.mantissa_bits;
  const int mantissa = magnitude & ((1 << l.mantissa_bits) - 1);
  // Subnormals (exponent 0) have no implicit 1 and the exponent of the smallest normal.
  const float value = exponent == 0
                          ? std::ldexp(static_cast<float>(mantissa), 1 - bias - l.mantissa_bits)
                          : std::ldexp(static_cast<float>((1 << l.mantissa_bits) + mantissa),
                                       exponent - bias - l.mantissa_bits);
  return negative ? -value : value;
}

// Bit arithmetic on the fp32 value (store_kv encodes every K/V element of every token: frexp /
// ldexp / nearbyint cost ~10x this).
uint8_t encode_fp8(float x, const Fp8Layout& l) {
  const auto bits = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | l.nan_bits;
  const float a = std::bit_cast<float>(abs);
  const int bias = (1 << (l.exponent_bits - 1)) - 1;
  if (a >= l.max_finite) return sign | l.max_finite_bits;  // saturate (see kv_format.h)
  if (a < l.min_normal) {
    // Subnormal: a count of quanta 2^(1 - bias - m), rounded to nearest even by adding and
    // subtracting 2^23 (exact below it; the sum rounds in the FPU's default mode, ties to even).
    const float quanta = a * l.subnormal_scale;
    const float rounded = (quanta + 0x1p23f) - 0x1p23f;
    return sign | static_cast<uint8_t>(rounded);  // 2^m (a carry into the smallest normal) too
  }
  // Normal: drop fp32's low mantissa bits, rounding to nearest even (a carry moves the exponent).
  const int shift = 23 - l.mantissa_bits;
  const uint32_t rounded = abs + ((1u << (shift - 1)) - 1) + ((abs >> shift) & 1u);
  const int exponent = static_cast<int>(rounded >> 23) - 127 + bias;
  const uint32_t mantissa = (rounded >> shift) & ((1u << l.mantissa_bits) - 1);
  const uint32_t out = (static_cast<uint32_t>(exponent) << l.mantissa_bits) | mantissa;
  return sign | static_cast<uint8_t>(std::min<uint32_t>(out, l.max_finite_bits));
}

// Every FP8 byte's fp32 value, for the decoder's lookups.
using Fp8Table = std::array<float, 256>;
Fp8Table make_table(KvFormat format) {
  Fp8Table table{};
  const Fp8Layout l = layout_of(format);
  for (int i = 0; i < 256; ++i)
    table[static_cast<size_t>(i)] = decode_fp8(static_cast<uint8_t>(i), l);
  return table;
}

const Fp8Table& table_of(KvFormat format) {
  static const Fp8Table kE4M3 = make_table(KvFormat::kF8E4M3);
  static const Fp8Table kE5M2 = make_table(KvFormat::kF8E5M2);
  return format == KvFormat::kF8E4M3 ? kE4M3 : kE5M2;
}

// fp16's largest finite value, where encode_kv_row saturates.
constexpr float kF16Max = 65504.0f;

}  // namespace

int64_t kv_element_bytes(KvFormat format) {
  switch (format) {
    case KvFormat::kF32:
      return 4;
    case KvFormat::kF16:
    case KvFormat::kBF16:
      return 2;
    case KvFormat::kF8E4M3:
    case KvFormat::kF8E5M2:
      return 1;
  }
  LM_CHECK(false);
  return 0;
}

float fp8_to_fp32(uint8_t bits, KvFormat format) { return table_of(format)[bits]; }

uint8_t fp32_to_fp8(float x, KvFormat format) { return encode_fp8(x, layout_of(format)); }

void encode_kv_row(const float* src, void* dst, int64_t n, KvFormat format) {
  switch (format) {
    case KvFormat::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvFormat::kF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        const float x = std::isnan(src[i]) ? src[i] : std::clamp(src[i], -kF16Max, kF16Max);
        out[i] = fp32_to_fp16(x);
      }
      return;
    }
    case KvFormat::kBF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b = fp32_to_bf16(src[i]);
        if ((b & 0x7fff) == 0x7f80 && std::isfinite(src[i])) --b;  // rounded up to inf
        out[i] = b;
      }
      return;
    }
    case KvFormat::kF8E4M3:
    case KvFormat::kF8E5M2: {
      const Fp8Layout l = layout_of(format);
      auto* out = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = encode_fp8(src[i], l);
      return;
    }
  }
}

void decode_kv_row(const IsaKernels& kernels, KvFormat format, const void* src, float* dst,
                   int64_t n) {
  if (kernels.decode_kv != nullptr && format != KvFormat::kF32) {
    return kernels.decode_kv(format, src, dst, n);
  }
  switch (format) {
    case KvFormat::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case KvFormat::kF16:
      return kernels.dequantize_row(RowFormat::kF16, src, dst, n);
    case KvFormat::kBF16:
      return kernels.dequantize_row(RowFormat::kBF16, src, dst, n);
    case KvFormat::kF8E4M3:
    case KvFormat::kF8E5M2: {
      const Fp8Table& table = table_of(format);
      const auto* in = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = table[in[i]];
      return;
    }
  }
}

}  // namespace lm::kernels
