// Owned device memory (cudaMalloc, zeroed) and page-locked host memory (cudaMallocHost, so that
// device-to-host copies into it run asynchronously on the stream), freed on destruction; and
// what the device has free. The CUDA runner's only allocations: it allocates everything at start
// and nothing while serving, so CUDA graphs can replay its pointers.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/device_kv_plan.h"

namespace lm::cuda_runtime {

enum class MemoryKind { kDevice, kPinnedHost };

template <MemoryKind kKind>
class CudaMemory {
 public:
  CudaMemory() = default;
  explicit CudaMemory(int64_t bytes);
  CudaMemory(CudaMemory&& other) noexcept;
  CudaMemory& operator=(CudaMemory&& other) noexcept;
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;
  ~CudaMemory() { release(); }

  template <typename T>
  T* as(int64_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(data_) + byte_offset);
  }
  int64_t bytes() const { return bytes_; }

 private:
  void release();

  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

using DeviceAllocation = CudaMemory<MemoryKind::kDevice>;
using PinnedAllocation = CudaMemory<MemoryKind::kPinnedHost>;

// One device allocation for several buffers: `memory` (allocated here) carved into the parts in
// order, each at a kDeviceArenaAlignment boundary; a part of 0 bytes gets a null pointer.
void carve(DeviceAllocation& memory, const std::vector<std::pair<void**, int64_t>>& parts);

// A part of carve() for a typed pointer.
template <typename T>
std::pair<void**, int64_t> part(T*& ptr, int64_t bytes) {
  return {reinterpret_cast<void**>(&ptr), bytes};
}

// cudaMemGetInfo of the current device.
DeviceMemoryInfo device_memory_info();

}  // namespace lm::cuda_runtime
