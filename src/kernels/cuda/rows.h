// Row moves of a flat batch on the device: the logits rows gathered before the LM head, a bias
// added to every row. CPU twins: the copies and the bias add of model/llama_model.cc and
// kernels/cpu/linear.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lm::kernels::cuda {

// out[r] = x[rows[r]] for r < num_rows; x: [*, n], out: [num_rows, n], rows on the device.
void gather_rows(const float* x, const int32_t* rows, float* out, int64_t num_rows, int64_t n,
                 cudaStream_t stream);

// y[r, j] += bias[j] for r < num_rows, j < n.
void add_bias_rows(float* y, const float* bias, int64_t num_rows, int64_t n, cudaStream_t stream);

}  // namespace lm::kernels::cuda
