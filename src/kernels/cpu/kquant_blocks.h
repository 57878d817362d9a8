// GGML's K-quant super-blocks (Q4_K, Q5_K, Q6_K): 256 weights each, split into 8 groups of 32.
// Byte layouts, GGML's, byte for byte (fp16 fields unaligned, read with memcpy):
//   Q4_K (144 B): {fp16 d; fp16 dmin; uint8 scales[12]; uint8 qs[128]}
//   Q5_K (176 B): {fp16 d; fp16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]}
//   Q6_K (210 B): {uint8 ql[128]; uint8 qh[64]; int8 scales[16]; fp16 d}
// Q4_K/Q5_K group g: value = d * sc[g] * q - dmin * mn[g], with q in [0, 15] / [0, 31] and the
// 6-bit sc/mn packed into `scales` (see unpack_scales_k4). Q6_K: every 16 values have their own
// int8 scale: value = d * scales[i / 16] * (q - 32), q in [0, 63].
// Element order inside a super-block: for each 64 (Q4_K/Q5_K) or 128 (Q6_K) values, the low
// nibbles of a run of qs bytes come first, then the high nibbles (see group_values_*).
#pragma once

#include <cstdint>

namespace lm::kernels::kquant {

inline constexpr int64_t kSuperBlock = 256;
inline constexpr int64_t kGroups = 8;  // groups of 32 per super-block
inline constexpr int64_t kQ4_KBytes = 144;
inline constexpr int64_t kQ5_KBytes = 176;
inline constexpr int64_t kQ6_KBytes = 210;

// Offsets inside a block.
inline constexpr int kScalesOffset = 4;    // Q4_K, Q5_K
inline constexpr int kQ4_KQsOffset = 16;   // Q4_K
inline constexpr int kQ5_KQhOffset = 16;   // Q5_K
inline constexpr int kQ5_KQsOffset = 48;   // Q5_K
inline constexpr int kQ6_KQhOffset = 128;  // Q6_K
inline constexpr int kQ6_KScalesOffset = 192;
inline constexpr int kQ6_KDOffset = 208;

// The eight 6-bit scales and mins of a Q4_K/Q5_K block. Groups 0-3 keep theirs in the low six
// bits of bytes 0-3 (scales) and 4-7 (mins); groups 4-7 split theirs between a nibble of bytes
// 8-11 and the top two bits of bytes 0-7.
// NOTE: `static` on purpose: the per-ISA files include this header, and an external-linkage
// inline copy compiled with -mavx2 could be the one the linker keeps for every caller.
static inline void unpack_scales_k4(const uint8_t* s, uint8_t sc[8], uint8_t mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    mn[j] = s[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
    mn[j] = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// The 32 unsigned quantized values of group g (0-7) of a block, in element order:
// Q4_K in [0, 15], Q5_K in [0, 31], Q6_K in [0, 63] (before its -32 offset).
static inline void group_values_q4_k(const uint8_t* block, int g, uint8_t q[32]) {
  const uint8_t* qs = block + kQ4_KQsOffset + 32 * (g / 2);
  const int shift = (g % 2) * 4;
  for (int l = 0; l < 32; ++l) q[l] = (qs[l] >> shift) & 0x0f;
}

static inline void group_values_q5_k(const uint8_t* block, int g, uint8_t q[32]) {
  const uint8_t* qs = block + kQ5_KQsOffset + 32 * (g / 2);
  const uint8_t* qh = block + kQ5_KQhOffset;
  const int shift = (g % 2) * 4;
  for (int l = 0; l < 32; ++l) {
    q[l] = static_cast<uint8_t>(((qs[l] >> shift) & 0x0f) | (((qh[l] >> g) & 1) << 4));
  }
}

static inline void group_values_q6_k(const uint8_t* block, int g, uint8_t q[32]) {
  const int half = g / 4;  // 128 values per half
  const int t = g % 4;
  const uint8_t* ql = block + 64 * half + 32 * (t & 1);
  const uint8_t* qh = block + kQ6_KQhOffset + 32 * half;
  const int nibble_shift = t >= 2 ? 4 : 0;
  for (int l = 0; l < 32; ++l) {
    q[l] = static_cast<uint8_t>(((ql[l] >> nibble_shift) & 0x0f) | (((qh[l] >> (2 * t)) & 3) << 4));
  }
}

}  // namespace lm::kernels::kquant
