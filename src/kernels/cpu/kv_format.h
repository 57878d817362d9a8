// Element formats of the paged KV cache (--kv-cache-dtype): fp32, fp16, bf16 and the two FP8
// formats TGI and vLLM name (fp8_e4m3fn, fp8_e5m2). Rows are written from fp32 once, when a token's
// K/V go to their slots, and read back as fp32 by attention (paged_attention.h), so the attention
// arithmetic is the fp32 kernel's on the decoded values.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace lm::kernels {

enum class KvFormat { kF32, kF16, kBF16, kF8E4M3, kF8E5M2 };

int64_t kv_element_bytes(KvFormat format);

// dst[i] = src[i] in `format`, rounded to nearest, ties to even. A finite value beyond the
// format's range becomes its largest finite value of that sign (as vLLM's FP8 cache writes with
// saturation), not inf or NaN: one outlier must not turn every later score of its sequence into
// NaN. NaN stays NaN.
void encode_kv_row(const float* src, void* dst, int64_t n, KvFormat format);

// dst[i] = src[i] as fp32 (exact: every value of each format is an fp32 value).
void decode_kv_row(const IsaKernels& kernels, KvFormat format, const void* src, float* dst,
                   int64_t n);

// One FP8 value's fp32 value / the FP8 byte nearest to x (encode_kv_row's rounding), exposed
// for the tests.
float fp8_to_fp32(uint8_t bits, KvFormat format);
uint8_t fp32_to_fp8(float x, KvFormat format);

}  // namespace lm::kernels
