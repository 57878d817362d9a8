// Q4_Z128, ours: 4-bit weights with an integer zero point and one fp16 scale per block of 128,
// the exact home of the pre-quantized checkpoints' usual 4-bit layout (GPTQ / AWQ /
// compressed-tensors with groups of 128, a multiple of it, or one group a row). A block is
//   {fp16 d; uint8 z; uint8 unused (0); uint8 qs[64]}   68 bytes, 4.25 bits a weight
// with value = (nibble - z) * d, z in [0, 15]; element 32j + i (i < 16) is the low nibble of
// qs[16j + i] and element 32j + 16 + i its high nibble (four Q4_0 blocks' nibble order, so the
// int8 kernels unpack a 32-element sub-block as they unpack Q4_0).
// Why a format of our own: GGML's nearest types cost more bytes for the same values. Q4_0 (an
// fp16 d per 32, 4.5 bits) holds only z = 8; Q4_1's minimum m = -d * z is not an fp16 in general;
// so AWQ's zero points took Q5_0 (5.5 bits against the checkpoint's 4.16), and decode, which
// streams every weight byte, ran at 73% of the checkpoint's bandwidth roofline.
// The int8 kernels take the zero point as a minimum once per block: against the block's 4
// activation blocks j (int8 values q_j, scale dx_j, s_j = dx_j * sum(q_j)),
//   sum += d * (sum over j of dx_j * float(sum(nibble * q_j))) + (-(d * z)) * (s_0 + ... + s_3)
// where -(d * z) is exact in fp32 (an 11-bit significand times a 4-bit integer).
#pragma once

#include <cstdint>

#include "kernels/cpu/row_format.h"

namespace lm::kernels {

struct BlockQ8Act;  // int8_dot.h

namespace q4z {

inline constexpr int64_t kBlock = 128;
inline constexpr int64_t kBytes = 68;
inline constexpr int64_t kDOffset = 0;
inline constexpr int64_t kZOffset = 2;
inline constexpr int64_t kQsOffset = 4;
inline constexpr int kMaxZero = 15;
// Sub-blocks of 32 (one activation block each) per block.
inline constexpr int64_t kSubBlocks = kBlock / 32;

}  // namespace q4z

// The scalar definitions every ISA's table uses for this format (k a multiple of 128).
void dequantize_row_q4_z128(const void* src, float* dst, int64_t k);
float dot_row_q4_z128(const void* row, const float* x, int64_t k);
float dot_row_q8_q4_z128(const void* row, const BlockQ8Act* xq, int64_t k);

// GGML's blocks for a reader without Q4_Z128 (the CUDA runner reads Q8_0 and Q4_0): true when
// every value of the row is a Q4_0 level ((nibble - z) in [-8, 7]: z = 8, as symmetric GPTQ
// stores, or any block whose nibbles lie in [z - 8, z + 7]).
bool q4_z128_fits_q4_0(const void* row, int64_t k);
// The row re-encoded exactly in `format`, Q8_0 (any row: q = nibble - z) or Q4_0 (rows that
// q4_z128_fits_q4_0: nibble - z + 8), each block of 32 with its block of 128's d.
void q4_z128_to_ggml_row(RowFormat format, const void* src, void* dst, int64_t k);

}  // namespace lm::kernels
