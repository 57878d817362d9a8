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

}  // namespace lm::ops
