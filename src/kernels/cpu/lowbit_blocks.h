// GGML's low-bit formats of llama.cpp's small files (Q2_K and Q3_K: the Q2_K / Q3_K_* files;
// IQ4_NL and IQ4_XS: the IQ4 files). Every group of 32 weights decodes to 32 int8 values q with an
// integer scale sc per 16 (and, for Q2_K, an integer min mn per 16):
//   value i = (d * sc[i / 16]) * q[i] - (dmin * mn[i / 16])
// which is gguf-py's order of operations (so the scalar dequantizer matches it bit for bit). The
// product is exact in fp32 (fp16 d: 11 significant bits, |sc| <= 32: 6, |q| <= 127: 7; 24 in all),
// so only the subtraction rounds, whatever the order or fusion, and every ISA gives the same
// values. The int8 dots are exact in int32 per group (sum of sc * q * x, minus sum of mn * x).
// Byte layouts, GGML's (ggml-common.h), byte for byte (fp16 fields unaligned, read with memcpy):
//   Q2_K   (84 B / 256): {uint8 scales[16]; uint8 qs[64]; fp16 d; fp16 dmin}
//          scales[j]: low nibble the scale, high nibble the min, of elements 16j..16j+15;
//          element 128h + 32s + l (h < 2, s < 4, l < 32) = (qs[32h + l] >> 2s) & 3.
//   Q3_K   (110 B / 256): {uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; fp16 d}
//          element e = 128h + 32s + l: (qs[32h + l] >> 2s) & 3, minus 4 where bit e / 32 of
//          hmask[l] is clear; sixteen 6-bit scales, minus 32, packed in `scales` (q3_k_scale).
//   IQ4_NL (18 B / 32): {fp16 d; uint8 qs[16]}: element i < 16 = kIq4Values[qs[i] & 15], element
//          i + 16 = kIq4Values[qs[i] >> 4]; sc = 1.
//   IQ4_XS (136 B / 256): {fp16 d; uint16 scales_h; uint8 scales_l[4]; uint8 qs[128]}: group g
//          has the 6-bit scale ((scales_l[g / 2] >> 4 (g % 2)) & 15) | ((scales_h >> 2g) & 3) << 4,
//          minus 32, and IQ4_NL's nibble order over qs[16g, 16g + 16).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/row_format.h"

namespace lm::kernels::lowbit {

inline constexpr int64_t kQ2_KBytes = 84;
inline constexpr int64_t kQ3_KBytes = 110;
inline constexpr int64_t kIQ4_NLBytes = 18;
inline constexpr int64_t kIQ4_XSBytes = 136;

// Offsets inside a block.
inline constexpr int kQ2_KQsOffset = 16;
inline constexpr int kQ2_KDOffset = 80;  // then dmin at 82
inline constexpr int kQ3_KQsOffset = 32;
inline constexpr int kQ3_KScalesOffset = 96;
inline constexpr int kQ3_KDOffset = 108;
inline constexpr int kIQ4_NLQsOffset = 2;
inline constexpr int kIQ4_XSScalesHOffset = 2;
inline constexpr int kIQ4_XSScalesLOffset = 4;
inline constexpr int kIQ4_XSQsOffset = 8;

// The 16 non-uniform levels of the IQ4 formats (GGML's kvalues_iq4nl).
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// Groups of 32 in one block: 1 for IQ4_NL, 8 for the 256-element super-blocks.
inline constexpr int groups_per_block(RowFormat format) {
  return format == RowFormat::kIQ4_NL ? 1 : 8;
}

// One group of 32, decoded: values, and the integer scale and min of each half of 16.
struct Group {
  int8_t q[32];
  int32_t sc[2];
  int32_t mn[2];  // Q2_K's mins; 0 for the other formats
};

// The fp16 multipliers of a block: d, and dmin (Q2_K; 0 for the others).
struct BlockScales {
  float d;
  float dmin;
};

// NOTE: the helpers are `static` on purpose, as in kquant_blocks.h: the per-ISA files include
// this header, and an external-linkage inline copy compiled with -mavx2 could be the one the
// linker keeps for every caller. The fp16 conversion is the caller's (F16C or base/fp16.h).
static inline uint16_t d_bits(RowFormat format, const uint8_t* block) {
  const int offset = format == RowFormat::kQ2_K   ? kQ2_KDOffset
                     : format == RowFormat::kQ3_K ? kQ3_KDOffset
                                                  : 0;
  uint16_t h;
  std::memcpy(&h, block + offset, sizeof(h));
  return h;
}

// Q2_K's dmin (other formats: 0x0000, +0).
static inline uint16_t dmin_bits(RowFormat format, const uint8_t* block) {
  uint16_t h = 0;
  if (format == RowFormat::kQ2_K) std::memcpy(&h, block + kQ2_KDOffset + 2, sizeof(h));
  return h;
}

// Q3_K's scale of elements 16s..16s+15 (s < 16), in [-32, 31]: the low nibble of byte s (s < 8)
// or the high nibble of byte s - 8, with bits 2(s / 4)..+1 of byte 8 + s % 4 on top.
static inline int32_t q3_k_scale(const uint8_t* scales, int s) {
  const int low = s < 8 ? scales[s] & 15 : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | (high << 4)) - 32;
}

static inline int32_t iq4_xs_scale(const uint8_t* block, int g) {
  uint16_t scales_h;
  std::memcpy(&scales_h, block + kIQ4_XSScalesHOffset, sizeof(scales_h));
  const int low = (block[kIQ4_XSScalesLOffset + g / 2] >> (4 * (g % 2))) & 15;
  const int high = (scales_h >> (2 * g)) & 3;
  return (low | (high << 4)) - 32;
}

// Group g (< groups_per_block) of `block`, in element order.
static inline void decode_group(RowFormat format, const uint8_t* block, int g, Group& out) {
  out.mn[0] = out.mn[1] = 0;
  switch (format) {
    case RowFormat::kQ2_K: {
      const uint8_t* qs = block + kQ2_KQsOffset + 32 * (g / 4);
      for (int l = 0; l < 32; ++l) out.q[l] = static_cast<int8_t>((qs[l] >> (2 * (g % 4))) & 3);
      for (int h = 0; h < 2; ++h) {
        out.sc[h] = block[2 * g + h] & 15;
        out.mn[h] = block[2 * g + h] >> 4;
      }
      return;
    }
    case RowFormat::kQ3_K: {
      const uint8_t* qs = block + kQ3_KQsOffset + 32 * (g / 4);
      for (int l = 0; l < 32; ++l) {
        const int low = (qs[l] >> (2 * (g % 4))) & 3;
        const int high = (block[l] >> g) & 1;
        out.q[l] = static_cast<int8_t>(low - (high != 0 ? 0 : 4));
      }
      for (int h = 0; h < 2; ++h) out.sc[h] = q3_k_scale(block + kQ3_KScalesOffset, 2 * g + h);
      return;
    }
    case RowFormat::kIQ4_NL:
    case RowFormat::kIQ4_XS: {
      const bool xs = format == RowFormat::kIQ4_XS;
      const uint8_t* qs = block + (xs ? kIQ4_XSQsOffset + 16 * g : kIQ4_NLQsOffset);
      for (int l = 0; l < 16; ++l) {
        out.q[l] = kIq4Values[qs[l] & 15];
        out.q[l + 16] = kIq4Values[qs[l] >> 4];
      }
      out.sc[0] = out.sc[1] = xs ? iq4_xs_scale(block, g) : 1;
      return;
    }
    default:
      return;
  }
}

}  // namespace lm::kernels::lowbit
