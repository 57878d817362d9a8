// LM_CUDA_CHECK: a failed CUDA call is a bug or a lost device, never a request error, so it aborts
// with file:line like LM_CHECK (base/check.h) and the runtime's message.
#pragma once

#include <cuda_runtime_api.h>

namespace lm::kernels::cuda::detail {
[[noreturn]] void cuda_failed(const char* file, int line, const char* expr, cudaError_t error);
}  // namespace lm::kernels::cuda::detail

#define LM_CUDA_CHECK(expr)                                                                \
  do {                                                                                     \
    const cudaError_t lm_cuda_error_ = (expr);                                             \
    if (lm_cuda_error_ != cudaSuccess)                                                     \
      ::lm::kernels::cuda::detail::cuda_failed(__FILE__, __LINE__, #expr, lm_cuda_error_); \
  } while (0)
