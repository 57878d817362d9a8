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

// apply_rope in two halves, so a forward computes each token's cos and sin once for q, k and
// every layer (sincos of 512 tokens x 32 pairs, twice a layer, was ~1% of a SmolLM2 prefill) and
// rotates rows on any thread: cos[t * half + i] = cos(float(positions[t]) * inv_freq[i]) *
// attention_scaling, sin likewise, for t < num_tokens, i < half (= rotary_dim / 2).
void rope_cos_sin(const int32_t* positions, const float* inv_freq, int64_t num_tokens, int64_t half,
                  float attention_scaling, float* cos, float* sin);

// x: [num_tokens, num_heads, head_dim] rotated in place by the tables of rope_cos_sin (rows
// [0, num_tokens) of them, half = rotary_dim / 2; rotary_dim 0: head_dim): the same bits as
// apply_rope.
void apply_rope_cos_sin(float* x, const float* cos, const float* sin, int64_t num_tokens,
                        int64_t num_heads, int64_t head_dim, RopeMode mode, int64_t rotary_dim = 0);

}  // namespace lm::kernels
