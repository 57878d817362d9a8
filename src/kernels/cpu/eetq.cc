// EETQ's int8 weight-only quantizer, as TGI's --quantize eetq runs it: the weight in fp16
// (TGI converts it before EETQ's quant_weights), then FasterTransformer's symmetric_quantize on
// the CPU. Per output channel (one of our rows) the fp32 max|w| is scaled by 1/128; the channel's
// scale is that in fp16, while each value is divided by the fp32 one before that rounding:
// q = clamp(round(w / (max|w| / 128)), -128, 127), round() half away from zero (so the largest
// positive value clamps to 127 and the most negative stays -128).
//
// q times the row's one fp16 scale is exactly a Q8_0 block whose d is that scale, so the rows are
// written as Q8_0 and served by its kernels: EETQ's values with no rounding of ours.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/cpu/eetq.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {

void quantize_row_eetq(const float* src, void* dst, int64_t k) {
  LM_CHECK(k % kQuantBlockSize == 0);
  std::vector<float> row(static_cast<size_t>(k));  // the row as TGI hands it over: in fp16
  float max_abs = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    row[static_cast<size_t>(i)] = fp16_to_fp32(fp32_to_fp16(src[i]));
    max_abs = std::max(max_abs, std::fabs(row[static_cast<size_t>(i)]));
  }
  const float scale = max_abs * (1.0f / 128.0f);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / kQuantBlockSize; ++b) {
    uint8_t* block = out + b * quant::kQ8_0Bytes;
    quant::store_f16(block, scale);
    for (int64_t i = 0; i < kQuantBlockSize; ++i) {
      const float w = row[static_cast<size_t>(b * kQuantBlockSize + i)];
      // An all-zero channel divides 0 by 0: EETQ's clamp, std::min(127.f, NaN), gives 127 (times
      // a zero scale).
      const float q =
          scale == 0.0f ? 127.0f : std::max(-128.0f, std::min(127.0f, std::round(w / scale)));
      block[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
}

}  // namespace lm::kernels
