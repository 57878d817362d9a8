// Weight row formats (fp32, fp16, bf16, GGML's Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 blocks, Q4_K/Q5_K/Q6_K
// super-blocks and the low-bit Q2_K/Q3_K/IQ4_NL/IQ4_XS): their block geometry, and whole-row
// conversion and dot product against fp32 activations with fp32 accumulation.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace lm::kernels {

enum class RowFormat {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kQ2_K,
  kQ3_K,
  kIQ4_NL,
  kIQ4_XS,
  kQ4_Z128,  // ours (q4_z128_blocks.h): the pre-quantized checkpoints' 4-bit groups of 128
  kNF4,      // bitsandbytes' 4-bit formats (bnb4_blocks.h): no int8 dot, fp32 activations
  kFP4
};

// A row of k elements is k / block_size blocks of block_bytes each (block_size 1 for the
// float formats). Quantized layouts are GGML's, byte for byte:
//   Q8_0: {fp16 d; int8 qs[32]}            value = qs[i] * d
//   Q4_0: {fp16 d; uint8 qs[16]}           value = (nibble - 8) * d
//   Q4_1: {fp16 d; fp16 m; uint8 qs[16]}   value = nibble * d + m
//   Q5_0: {fp16 d; uint8 qh[4]; uint8 qs[16]}          value = (q5 - 16) * d
//   Q5_1: {fp16 d; fp16 m; uint8 qh[4]; uint8 qs[16]}  value = q5 * d + m
// where element i < 16 is the low nibble of qs[i] and element i + 16 its high nibble; Q5's fifth
// bit of element i is bit i of the little-endian 32-bit qh.
// The K-quants (blocks of 256) are described in kquant_blocks.h, the low-bit formats in
// lowbit_blocks.h, bitsandbytes' NF4/FP4 (blocks of 64) in bnb4_blocks.h, our Q4_Z128 (blocks of
// 128 with a zero point) in q4_z128_blocks.h.
struct RowFormatInfo {
  const char* name;
  int64_t block_size;
  int64_t block_bytes;
};

inline constexpr int64_t kQuantBlockSize = 32;

// True for Q4_K, Q5_K and Q6_K (super-blocks of 256).
bool is_kquant(RowFormat format);
// True for bitsandbytes' NF4 and FP4.
bool is_bnb4(RowFormat format);

// True for Q2_K, Q3_K, IQ4_NL and IQ4_XS (lowbit_blocks.h: int8 values with integer scales per 16).
bool is_lowbit(RowFormat format);

const RowFormatInfo& row_format_info(RowFormat format);

// Bytes of one row of k elements; k must be a multiple of the block size.
int64_t row_bytes(RowFormat format, int64_t k);

// dst[0, k) = the row's values as fp32.
void dequantize_row(RowFormat format, const void* src, float* dst, int64_t k, Isa isa = best_isa());

// sum_i row[i] * x[i] in fp32; quantized rows are dequantized on the fly (x stays fp32).
float dot_row(RowFormat format, const void* row, const float* x, int64_t k, Isa isa = best_isa());

// GGML's reference quantizers (k a multiple of 32). Used to make test data and by converters.
void quantize_row_q8_0(const float* src, void* dst, int64_t k);
void quantize_row_q4_0(const float* src, void* dst, int64_t k);
void quantize_row_q4_1(const float* src, void* dst, int64_t k);
void quantize_row_q5_0(const float* src, void* dst, int64_t k);
void quantize_row_q5_1(const float* src, void* dst, int64_t k);
// GGML's reference K-quant quantizers (k a multiple of 256), as llama-quantize writes them without
// an importance matrix (kquant_quantize.cc); the same bytes at every ISA.
void quantize_row_q4_k(const float* src, void* dst, int64_t k, Isa isa = best_isa());
void quantize_row_q5_k(const float* src, void* dst, int64_t k, Isa isa = best_isa());
void quantize_row_q6_k(const float* src, void* dst, int64_t k, Isa isa = best_isa());
// bitsandbytes' quantize_4bit (blocksize 64, no nested statistics; k a multiple of 64), bnb4.cc.
void quantize_row_nf4(const float* src, void* dst, int64_t k);
void quantize_row_fp4(const float* src, void* dst, int64_t k);
// AutoAWQ's asymmetric 4-bit quantizer with groups of 128, into Q4_Z128 (k a multiple of 128;
// q4_z128.cc). Makes test data.
void quantize_row_q4_z128(const float* src, void* dst, int64_t k);

}  // namespace lm::kernels
