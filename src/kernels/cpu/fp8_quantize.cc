#include "kernels/cpu/fp8_quantize.h"

#include <algorithm>

#include "base/fp16.h"
#include "kernels/cpu/kv_format.h"

namespace lm::kernels {
namespace {

constexpr float kE4M3Max = 448.0f;

// x rounded to the weight's dtype, as each torch operation on such a tensor rounds its result.
float in_dtype(Round16 dtype, float x) {
  if (dtype == Round16::kBF16) return round_to_bf16(x);
  if (dtype == Round16::kF16) return round_to_fp16(x);
  return x;
}

}  // namespace

float fp8_tensor_scale(float absmax, Round16 dtype) {
  const float clamped = std::max(absmax, in_dtype(dtype, 1e-12f));
  return in_dtype(dtype, in_dtype(dtype, 1.0f / clamped) * kE4M3Max);
}

void quantize_row_fp8(const float* w, int64_t k, float scale, Round16 dtype, uint8_t* dst) {
  for (int64_t i = 0; i < k; ++i) {
    const float x = std::clamp(in_dtype(dtype, w[i] * scale), -kE4M3Max, kE4M3Max);
    dst[i] = fp32_to_fp8(x, KvFormat::kF8E4M3);
  }
}

}  // namespace lm::kernels
