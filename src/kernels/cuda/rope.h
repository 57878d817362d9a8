// Rotary position embeddings on the device, the same contract as the CPU twin
// (kernels/cpu/rope.h): the caller passes inv_freq already adjusted for the model's rope scaling
// (linear, dynamic NTK, llama3, yarn), so every scaling works here unchanged.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/rope.h"

namespace lm::kernels::cuda {

// x: [num_tokens, num_heads, head_dim] fp32, rotated in place; positions: [num_tokens];
// inv_freq: [head_dim / 2] (device memory). Pair i rotates by float(position) * inv_freq[i],
// cos and sin scaled by attention_scaling. kNeox pairs i with i + head_dim / 2 (HF rotate_half);
// kInterleaved pairs 2i with 2i + 1 (GGUF weights).
void apply_rope(float* x, const int32_t* positions, const float* inv_freq, int64_t num_tokens,
                int64_t num_heads, int64_t head_dim, RopeMode mode, float attention_scaling,
                cudaStream_t stream);

}  // namespace lm::kernels::cuda
