// Float weights stored in another float dtype (TGI's --dtype): F32/F16/BF16 rows re-encoded as
// F32/F16/BF16, rounding to nearest even as torch's .to(dtype) does.
#pragma once

#include <optional>

#include "tensor/tensor.h"

namespace lm::ops {

// True for the dtypes --dtype converts between (F32, F16, BF16); block-quantized ones keep
// their format.
bool is_float_weight_dtype(DType dtype);

// Writes w (2-D, rows layout, a float dtype) as `dtype` to dst (w.numel() elements of `dtype`)
// and returns a view of them.
Tensor convert_weight(const Tensor& w, DType dtype, void* dst);

// The block types float weights can be quantized to at load (--quantize q8_0 ...): Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, by GGML's reference quantizers, bitsandbytes' NF4 and
// FP4 by its quantize_4bit, and F8_E4M3 (TGI's fp8; only matrices of whole FP8 panels, rows a
// multiple of 16).
bool is_load_quantization_dtype(DType dtype);
// The block type --quantize `requested` gives w (2-D, rows layout, a float dtype): `requested`
// when its rows are whole blocks; for a 256-value K-quant whose rows are only whole 32-value
// blocks, the type llama.cpp's quantize falls back to (Q4_K -> Q5_0, Q5_K -> Q5_1,
// Q6_K -> Q8_0); nullopt when w stays as it is (llama.cpp keeps such rows float too).
std::optional<DType> load_quantization_target(const Tensor& w, DType requested);
// The quantizer that writes a matrix's rows at load: its block type's own (GGML's reference
// quantizers, bitsandbytes' quantize_4bit), EETQ's per-channel int8, written as Q8_0 rows (TGI's
// --quantize eetq; kernels/cpu/eetq.h), or LLM.int8's per-row int8 with one fp32 absmax a row
// (TGI's --quantize bitsandbytes; kernels/cpu/llm_int8.h), or FP8 E4M3 with one scale a tensor
// (TGI's --quantize fp8; kernels/cpu/fp8_quantize.h).
enum class RowQuantizer { kBlockType, kEetq, kLlmInt8, kFp8Tensor };
// Writes w quantized to `block` (its load_quantization_target; each row through fp32, by
// `quantizer`: kEetq and kLlmInt8 need Q8_0, kFp8Tensor F8_E4M3) to dst
// (dtype_bytes(block, w.numel()) bytes) and returns a view of them. kLlmInt8 writes each row's
// absmax to `scales` (w.dim(0) floats) and the view points at them (Tensor::int8_row_absmax);
// kFp8Tensor writes the tensor's one dequantization scale to scales[0] (the view has no
// Tensor::fp8_scales yet: the caller owns those).
Tensor quantize_weight(const Tensor& w, DType block, void* dst,
                       RowQuantizer quantizer = RowQuantizer::kBlockType, float* scales = nullptr);

}  // namespace lm::ops
