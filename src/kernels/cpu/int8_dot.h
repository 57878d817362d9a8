// Integer dot products of GGML quantized weight rows with activations quantized to int8 per
// block of 32, as llama.cpp computes these formats (its Q8_0 / Q8_1 activation blocks): the
// activation row is quantized once, then every weight row is an int8 x int8 (or nibble x int8)
// dot with int32 accumulation per block and one fp32 multiply-add per block.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {

// One block of 32 activations: value i = qs[i] * d with d = max|x| / 127, and s = d * sum(qs)
// (llama.cpp's Q8_1 sum, which Q4_1's offset m needs). fp32 scales: these blocks never touch
// disk, so they need not be GGML's fp16 layout.
struct BlockQ8Act {
  float d;
  float s;
  int8_t qs[32];
};

// True for the weight formats with an int8 dot (every GGML block format, and Q4_Z128).
bool supports_int8_dot(RowFormat format);

// dst[0, k / 32) = x[0, k) quantized (k a multiple of 32). q = round-half-even(x / d), so every
// ISA produces the same bytes.
void quantize_row_q8_act(const float* x, BlockQ8Act* dst, int64_t k, Isa isa = best_isa());

// sum_i row[i] * xq[i] for a row of k elements in an int8-dot format, exact in int32 per block
// (K-quant rows read 8 activation blocks per super-block).
float dot_row_q8(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k,
                 Isa isa = best_isa());

// out[i * out_stride] = dot_row_q8(format, row, xq + i * xq_stride, k) for i < m, with the same
// sums (bit for bit) as m single calls.
void dot_rows_q8(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t xq_stride,
                 int64_t m, int64_t k, float* out, int64_t out_stride, Isa isa = best_isa());

// Per-ISA entries of the IsaKernels table (the scalar pair is the reference).
void quantize_row_q8_act_scalar(const float* x, BlockQ8Act* dst, int64_t k);
float dot_row_q8_scalar(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k);
void quantize_row_q8_act_avx2(const float* x, BlockQ8Act* dst, int64_t k);
float dot_row_q8_avx2(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k);
void dot_rows_q8_scalar(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t xq_stride,
                        int64_t m, int64_t k, float* out, int64_t out_stride);
void dot_rows_q8_avx2(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t xq_stride,
                      int64_t m, int64_t k, float* out, int64_t out_stride);

}  // namespace lm::kernels
