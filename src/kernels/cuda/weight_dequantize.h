// Weight rows and activations turned into the 16-bit operands of the cuBLAS GEMM: the batched
// (prefill) path of a Linear whose weights are not F16/BF16 dequantizes them into a scratch
// matrix first, and fp32 activations are rounded to the weights' 16-bit type. CPU twin:
// dequantize_row (kernels/cpu/row_format.h) rounded to fp16 / bf16.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/row_format.h"

namespace lm::kernels::cuda {

// Whether dequantize_rows_f16 reads `format` (F32, F16, BF16, Q8_0, Q4_0, Q4_1).
bool dequantize_supports(RowFormat format);

// out: [rows, k] fp16 (the __half bits), row j the values of w's row j (at w + j * w_row_bytes,
// 2-byte aligned) rounded to nearest even.
void dequantize_rows_f16(RowFormat format, const void* w, int64_t w_row_bytes, void* out,
                         int64_t rows, int64_t k, cudaStream_t stream);

// out[i] = x[i] rounded to nearest even: fp16 (bf16 false) or bf16 bits.
void round_activations(const float* x, void* out, int64_t n, bool bf16, cudaStream_t stream);

}  // namespace lm::kernels::cuda
