#include "runtime/cuda/device_allocation.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/device_weight_plan.h"

namespace lm::cuda_runtime {

template <MemoryKind kKind>
CudaMemory<kKind>::CudaMemory(int64_t bytes) : bytes_(bytes) {
  LM_CHECK(bytes >= 0);
  if (bytes == 0) return;
  if constexpr (kKind == MemoryKind::kDevice) {
    LM_CUDA_CHECK(cudaMalloc(&data_, static_cast<size_t>(bytes)));
    LM_CUDA_CHECK(cudaMemset(data_, 0, static_cast<size_t>(bytes)));
    // NOTE: cudaMemset may return before the zeros land, and the runner's stream does not wait
    // for the legacy default stream (cudaStreamNonBlocking): wait here, at start-up only.
    LM_CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    LM_CUDA_CHECK(cudaMallocHost(&data_, static_cast<size_t>(bytes)));
  }
}

template <MemoryKind kKind>
CudaMemory<kKind>::CudaMemory(CudaMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

template <MemoryKind kKind>
CudaMemory<kKind>& CudaMemory<kKind>::operator=(CudaMemory&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

template <MemoryKind kKind>
void CudaMemory<kKind>::release() {
  if (data_ == nullptr) return;
  if constexpr (kKind == MemoryKind::kDevice) {
    cudaFree(data_);
  } else {
    cudaFreeHost(data_);
  }
  data_ = nullptr;
  bytes_ = 0;
}

template class CudaMemory<MemoryKind::kDevice>;
template class CudaMemory<MemoryKind::kPinnedHost>;

void carve(DeviceAllocation& memory, const std::vector<std::pair<void**, int64_t>>& parts) {
  int64_t total = 0;
  for (const auto& part : parts) total += device_aligned(part.second);
  memory = DeviceAllocation(total);
  int64_t offset = 0;
  for (const auto& [ptr, bytes] : parts) {
    *ptr = bytes > 0 ? memory.as<void>(offset) : nullptr;
    offset += device_aligned(bytes);
  }
}

DeviceMemoryInfo device_memory_info() {
  size_t free_bytes = 0, total_bytes = 0;
  LM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return {static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
}

}  // namespace lm::cuda_runtime
