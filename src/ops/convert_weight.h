// Float weights stored in another float dtype (TGI's --dtype): F32/F16/BF16 rows re-encoded as
// F32/F16/BF16, rounding to nearest even as torch's .to(dtype) does.
#pragma once

#include "tensor/tensor.h"

namespace lm::ops {

// True for the dtypes --dtype converts between (F32, F16, BF16); block-quantized ones keep
// their format.
bool is_float_weight_dtype(DType dtype);

// Writes w (2-D, rows layout, a float dtype) as `dtype` to dst (w.numel() elements of `dtype`)
// and returns a view of them.
Tensor convert_weight(const Tensor& w, DType dtype, void* dst);

// The GGML block types float weights can be quantized to at load (--quantize q8_0 ...): Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, by GGML's reference quantizers.
bool is_load_quantization_dtype(DType dtype);
// True when w (2-D, rows layout, a float dtype) can be quantized to `block`: its rows are whole
// blocks (llama.cpp's quantize keeps the others as they are too).
bool can_quantize_weight(const Tensor& w, DType block);
// Writes w quantized to `block` (each row through fp32, GGML's reference quantizer) to dst
// (dtype_bytes(block, w.numel()) bytes) and returns a view of them.
Tensor quantize_weight(const Tensor& w, DType block, void* dst);

}  // namespace lm::ops
