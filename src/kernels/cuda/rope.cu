// RoPE: one block per token; each thread owns (head, pair) items and computes that pair's cos/sin
// itself (sincosf with full range reduction, as accurate as the CPU's std::cos/std::sin), which
// costs less than a shared table's barrier for the head counts we see.
#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/rope.h"

namespace lm::kernels::cuda {
namespace {

__global__ void rope_kernel(float* x, const int32_t* positions, const float* inv_freq,
                            int64_t num_heads, int64_t head_dim, bool neox,
                            float attention_scaling) {
  const int64_t token = blockIdx.x;
  const int64_t half = head_dim / 2;
  const float position = static_cast<float>(positions[token]);
  for (int64_t item = threadIdx.x; item < num_heads * half; item += blockDim.x) {
    const int64_t head = item / half;
    const int64_t i = item % half;
    // The product is rounded to fp32 first, as HF's fp32 `position * inv_freq` is.
    const float angle = __fmul_rn(position, inv_freq[i]);
    float sin_value;
    float cos_value;
    sincosf(angle, &sin_value, &cos_value);
    cos_value *= attention_scaling;
    sin_value *= attention_scaling;
    float* head_x = x + (token * num_heads + head) * head_dim;
    float* a = head_x + (neox ? i : 2 * i);
    float* b = a + (neox ? half : 1);
    const float a0 = *a;
    const float b0 = *b;
    *a = a0 * cos_value - b0 * sin_value;
    *b = b0 * cos_value + a0 * sin_value;
  }
}

}  // namespace

void apply_rope(float* x, const int32_t* positions, const float* inv_freq, int64_t num_tokens,
                int64_t num_heads, int64_t head_dim, RopeMode mode, float attention_scaling,
                cudaStream_t stream) {
  LM_CHECK(head_dim > 0 && head_dim % 2 == 0 && num_tokens >= 0 && num_heads > 0);
  if (num_tokens == 0) return;
  rope_kernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(
      x, positions, inv_freq, num_heads, head_dim, mode == RopeMode::kNeox, attention_scaling);
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lm::kernels::cuda
