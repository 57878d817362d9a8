// Device queries and the CUDA error reporter.
#include "kernels/cuda/device_info.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/cuda_check.h"

namespace lm::kernels::cuda {

namespace detail {

void cuda_failed(const char* file, int line, const char* expr, cudaError_t error) {
  std::fprintf(stderr, "%s:%d: CUDA call failed: %s: %s (%s)\n", file, line, expr,
               cudaGetErrorString(error), cudaGetErrorName(error));
  std::fflush(stderr);
  std::abort();
}

}  // namespace detail

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the sticky-free error and report none
    return 0;
  }
  return count;
}

std::string device_description(int index) {
  cudaDeviceProp prop{};
  LM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  char text[320];
  std::snprintf(text, sizeof(text), "%s, %.1f GiB, sm_%d%d", prop.name,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), prop.major,
                prop.minor);
  return text;
}

}  // namespace lm::kernels::cuda
