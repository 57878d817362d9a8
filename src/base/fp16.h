// IEEE half and bfloat16 <-> float conversions (bit-exact, round-to-nearest-even), and the two
// FP8 formats' values (OCP E4M3FN and E5M2, as torch.float8_e4m3fn / float8_e5m2 and safetensors'
// F8_E4M3 / F8_E5M2 store them), shared by loaders, kernels and tests.
#pragma once

#include <bit>
#include <cstdint>

namespace lm {

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ffu;
      bits = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    // Add 0.5 (as float) so the FPU rounds the mantissa for us.
    const float magic = std::bit_cast<float>(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(magic) - 0x3f000000u));
  }
  const uint32_t rounded = abs + 0xc8000fffu + ((abs >> 13) & 1u);  // rebias + round-to-even
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

inline float bf16_to_fp32(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t fp32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// x rounded to nearest even as a bfloat16 / an IEEE half, back in fp32.
inline float round_to_bf16(float x) { return bf16_to_fp32(fp32_to_bf16(x)); }
inline float round_to_fp16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

// E5M2 is the top byte of an fp16 (same exponent bias, 2 of its 10 mantissa bits): exact, with
// its infinities and NaNs.
inline float fp8_e5m2_to_fp32(uint8_t b) { return fp16_to_fp32(static_cast<uint16_t>(b << 8)); }

// E4M3FN (bias 7, no infinities, NaN at magnitude 0x7f): its bits placed at fp16's exponent and
// mantissa positions read as an fp16 2^8 times too small (bias 15 vs 7), subnormals included:
// E4M3's m * 2^-9 lands on fp16's subnormal (m << 7) * 2^-24 = m * 2^-17. Exact.
inline float fp8_e4m3_to_fp32(uint8_t b) {
  if ((b & 0x7fu) == 0x7fu) return std::bit_cast<float>(0x7fc00000u | ((b & 0x80u) << 24));
  const auto h = static_cast<uint16_t>(((b & 0x80u) << 8) | ((b & 0x7fu) << 7));
  return fp16_to_fp32(h) * 256.0f;
}

}  // namespace lm
