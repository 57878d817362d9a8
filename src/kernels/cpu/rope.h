// Rotary position embeddings applied in place, with HF's fp32 numerics.
#pragma once

#include <cstdint>

namespace lm::kernels {

enum class RopeMode {
  kNeox,         // HF rotate_half: element i pairs with i + head_dim / 2
  kInterleaved,  // GGUF / llama.cpp weights: element 2i pairs with 2i + 1
};

// x: [num_tokens, num_heads, head_dim], rotated in place; positions: [num_tokens];
// inv_freq: [rotary_dim / 2], already adjusted for the model's rope scaling. Pair i rotates by
// angle float(position) * inv_freq[i]; cos and sin are multiplied by attention_scaling (HF's
// llama3/yarn/longrope factor, 1 otherwise). Only each head's first rotary_dim elements rotate
// (0: all of them; HF's partial_rotary_factor), the pairs formed within them.
void apply_rope(float* x, const int32_t* positions, const float* inv_freq, int64_t num_tokens,
                int64_t num_heads, int64_t head_dim, RopeMode mode, float attention_scaling = 1.0f,
                int64_t rotary_dim = 0);

}  // namespace lm::kernels
