// RoPE: cos/sin computed in fp32 (as HF does, not from a cached table in higher precision), once
// per token, and applied to every head of that token.
#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

#include "base/check.h"

namespace lm::kernels {

void rope_cos_sin(const int32_t* positions, const float* inv_freq, int64_t num_tokens, int64_t half,
                  float attention_scaling, float* cos, float* sin) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float position = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = position * inv_freq[i];
      cos[t * half + i] = std::cos(angle) * attention_scaling;
      sin[t * half + i] = std::sin(angle) * attention_scaling;
    }
  }
}

void apply_rope_cos_sin(float* x, const float* cos, const float* sin, int64_t num_tokens,
                        int64_t num_heads, int64_t head_dim, RopeMode mode, int64_t rotary_dim) {
  if (rotary_dim == 0) rotary_dim = head_dim;
  LM_CHECK(head_dim > 0 && rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim);
  const int64_t half = rotary_dim / 2;
  // Pair (a, b) -> (a cos - b sin, b cos + a sin), written as HF's x * cos + rotate(x) * sin.
  const int64_t stride = mode == RopeMode::kNeox ? 1 : 2;
  const int64_t partner = mode == RopeMode::kNeox ? half : 1;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* cos_t = cos + t * half;
    const float* sin_t = sin + t * half;
    for (int64_t h = 0; h < num_heads; ++h) {
      float* head = x + (t * num_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        float* a = head + i * stride;
        float* b = a + partner;
        const float a0 = *a;
        const float b0 = *b;
        *a = a0 * cos_t[i] + (-b0) * sin_t[i];
        *b = b0 * cos_t[i] + a0 * sin_t[i];
      }
    }
  }
}

void apply_rope(float* x, const int32_t* positions, const float* inv_freq, int64_t num_tokens,
                int64_t num_heads, int64_t head_dim, RopeMode mode, float attention_scaling,
                int64_t rotary_dim) {
  if (rotary_dim == 0) rotary_dim = head_dim;
  LM_CHECK(head_dim > 0 && rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim);
  const int64_t half = rotary_dim / 2;
  std::vector<float> cos(static_cast<size_t>(num_tokens * half));
  std::vector<float> sin(static_cast<size_t>(num_tokens * half));
  rope_cos_sin(positions, inv_freq, num_tokens, half, attention_scaling, cos.data(), sin.data());
  apply_rope_cos_sin(x, cos.data(), sin.data(), num_tokens, num_heads, head_dim, mode, rotary_dim);
}

}  // namespace lm::kernels
