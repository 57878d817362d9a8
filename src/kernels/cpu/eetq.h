// EETQ's per-channel int8 weight quantization (TGI's --quantize eetq), written as Q8_0 rows.
#pragma once

#include <cstdint>

namespace lm::kernels {

// Quantizes one output channel (a row of k values, k a multiple of 32) as EETQ does (eetq.cc)
// into k / 32 Q8_0 blocks that all carry the channel's fp16 scale.
void quantize_row_eetq(const float* src, void* dst, int64_t k);

}  // namespace lm::kernels
