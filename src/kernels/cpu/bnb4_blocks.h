// bitsandbytes' 4-bit formats, NF4 and FP4 (TGI's --quantize bitsandbytes-nf4 / -fp4): 64 values
// per block, each a 4-bit index into a 16-entry code book of fp32 values in [-1, 1], times the
// block's absmax (fp32). Value = code[q] * absmax, in fp32, as bitsandbytes dequantizes before
// casting to the model's dtype.
// Block (36 bytes): {float absmax; uint8 qs[32]}, values 2i and 2i+1 in qs[i]'s high and low
// nibbles (bitsandbytes' packing), so the nibbles are bitsandbytes' bytes.
#pragma once

#include <cstdint>
#include <cstring>

namespace lm::kernels::bnb4 {

inline constexpr int64_t kBlock = 64;
inline constexpr int64_t kBlockBytes = 36;
inline constexpr int kQsOffset = 4;

// bitsandbytes' code books (bitsandbytes.functional.get_4bit_type), bit for bit.
inline constexpr float kNF4Code[16] = {
    -0x1.0p+0f,      -0x1.647362p-1f, -0x1.0cd66p-1f,  -0x1.94654p-2f,
    -0x1.23449ap-2f, -0x1.7a6a7ep-3f, -0x1.74f0e2p-4f, 0.0f,
    0x1.45f5fep-4f,  0x1.4995c6p-3f,  0x1.f809bap-3f,  0x1.5a0674p-2f,
    0x1.c3497p-2f,   0x1.200f56p-1f,  0x1.722766p-1f,  0x1.0p+0f};
inline constexpr float kFP4Code[16] = {
    0.0f, 0x1.555556p-8f,  0x1.555556p-1f,  1.0f,  0x1.555556p-2f,  0.5f,  0x1.555556p-3f,  0.25f,
    0.0f, -0x1.555556p-8f, -0x1.555556p-1f, -1.0f, -0x1.555556p-2f, -0.5f, -0x1.555556p-3f, -0.25f};
// The code indices in increasing value (bitsandbytes' argsort of the code book; FP4's two zeros
// in its order: values <= 0 round to index 0, small positive ones to index 8).
inline constexpr uint8_t kNF4Order[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
inline constexpr uint8_t kFP4Order[16] = {11, 10, 13, 12, 15, 14, 9, 0, 8, 1, 6, 7, 4, 5, 2, 3};

// NOTE: `static` on purpose, as in kquant_blocks.h (per-ISA files include this header).
static inline float block_absmax(const uint8_t* block) {
  float absmax;
  std::memcpy(&absmax, block, sizeof(absmax));
  return absmax;
}

// The 64 values of a block with code book `code`.
static inline void dequantize_block(const float* code, const uint8_t* block, float* out) {
  const float absmax = block_absmax(block);
  for (int i = 0; i < 32; ++i) {
    const uint8_t byte = block[kQsOffset + i];
    out[2 * i] = code[byte >> 4] * absmax;
    out[2 * i + 1] = code[byte & 0x0f] * absmax;
  }
}

}  // namespace lm::kernels::bnb4
