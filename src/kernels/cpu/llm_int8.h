// LLM.int8 (bitsandbytes' Linear8bitLt; TGI's --quantize bitsandbytes): int8 weight rows with one
// fp32 absmax each, and activations quantized to int8 per token except their outliers, which are
// multiplied in float.
#pragma once

#include <cstdint>

namespace lm::kernels {

// The activation magnitude from which LLM.int8 keeps a value in float (TGI's and transformers'
// threshold).
inline constexpr float kLlmInt8Threshold = 6.0f;

// Quantizes one weight row (k values, k a multiple of 32) as bitsandbytes' Int8Params does: the
// row in fp16, absmax = its largest magnitude, q = round(w * (127 / absmax)) in fp32 (127 / absmax
// as torch computes it), half to even. Writes q as k / 32 Q8_0 blocks whose scale is 1 (the kernels
// then read q itself) and returns absmax, the row's scale times 127 (0 for an all-zero row, whose q
// are 0).
float quantize_row_llm_int8(const float* src, void* dst, int64_t k);

// x [m, k] fp32 -> out [m, k]: each row as LLM.int8 multiplies it with the weights' q (before
// the products are scaled by absmax / 127). The row is cast to fp16; values of magnitude
// >= kLlmInt8Threshold there are outliers and stay as they are (fp32); the rest are quantized with
// the row's absmax over them, a = round(x16 * (127 / absmax)) half to even, and given as
// a * (absmax / 127). Per token where bitsandbytes takes a column as an outlier in every row of a
// call once any row has one there: the same for one row, and a token's output does not depend on
// the batch it runs in.
void llm_int8_activations(const float* x, float* out, int64_t m, int64_t k);

}  // namespace lm::kernels
