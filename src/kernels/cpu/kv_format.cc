#include "kernels/cpu/kv_format.h"

#include <algorithm>
#include <array>
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
};

Fp8Layout layout_of(KvFormat format) {
  if (format == KvFormat::kF8E4M3) return {4, 3, 0x7e, 0x7f};
  LM_CHECK(format == KvFormat::kF8E5M2);
  return {5, 2, 0x7b, 0x7f};
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

uint8_t encode_fp8(float x, const Fp8Layout& l) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | l.nan_bits;
  const float a = std::fabs(x);
  const float max_finite = decode_fp8(l.max_finite_bits, l);
  if (a >= max_finite) return sign | l.max_finite_bits;  // saturate (see kv_format.h)
  const int bias = (1 << (l.exponent_bits - 1)) - 1;
  const int min_exponent = 1 - bias;  // of the smallest normal
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): a's binary exponent is e - 1
  const int exponent = std::max(e - 1, min_exponent);
  // Multiples of the quantum at a's exponent, rounded to nearest even by the FPU (dividing by a
  // power of two is exact).
  const float quantum = std::ldexp(1.0f, exponent - l.mantissa_bits);
  const auto q = static_cast<int>(std::nearbyint(a / quantum));
  if (q == 0) return sign;
  // q < 2^(m+1), or == 2^(m+1) when rounding carried into the next exponent.
  int field = exponent + bias;
  int mantissa = q;
  if (q >= (2 << l.mantissa_bits)) {
    ++field;
    mantissa = q >> 1;
  }
  if (mantissa < (1 << l.mantissa_bits)) return sign | static_cast<uint8_t>(mantissa);  // subnormal
  const int bits = (field << l.mantissa_bits) | (mantissa - (1 << l.mantissa_bits));
  return sign | static_cast<uint8_t>(std::min(bits, static_cast<int>(l.max_finite_bits)));
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
