// Byte-level access to GGML quantized blocks, shared by the scalar kernels and the quantizers.
// Blocks are 18/20/34 bytes, so their fp16 fields are unaligned and read with memcpy.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/fp16.h"

namespace lm::kernels::quant {

inline constexpr int64_t kQ8_0Bytes = 34;  // fp16 d, int8 qs[32]
inline constexpr int64_t kQ4_0Bytes = 18;  // fp16 d, uint8 qs[16]
inline constexpr int64_t kQ4_1Bytes = 20;  // fp16 d, fp16 m, uint8 qs[16]
inline constexpr int64_t kQ5_0Bytes = 22;  // fp16 d, uint8 qh[4], uint8 qs[16]
inline constexpr int64_t kQ5_1Bytes = 24;  // fp16 d, fp16 m, uint8 qh[4], uint8 qs[16]

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return fp16_to_fp32(h);
}

inline void store_f16(uint8_t* p, float value) {
  const uint16_t h = fp32_to_fp16(value);
  std::memcpy(p, &h, sizeof(h));
}

// The 32 fifth bits of a Q5 block (bit i belongs to element i).
inline uint32_t load_qh(const uint8_t* p) {
  uint32_t qh;
  std::memcpy(&qh, p, sizeof(qh));
  return qh;
}

}  // namespace lm::kernels::quant
