// Elementwise kernels of the Llama block on the device (CPU twins in kernels/cpu/activations.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lm::kernels::cuda {

// out[i] = silu(gate[i]) * up[i] with silu(x) = x / (1 + exp(-x)); out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);

// y[i] += x[i] (the residual connection).
void add_inplace(float* y, const float* x, int64_t n, cudaStream_t stream);

}  // namespace lm::kernels::cuda
