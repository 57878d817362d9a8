// Shared pieces of the CUDA kernel tests: a fixture that skips without a device, device buffers
// that upload/download std::vectors, seeded random data, and a tolerance check that reports the
// worst element.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_info.h"

namespace lm::kernels::cuda::testing {

class CudaKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_count() == 0) {
      GTEST_SKIP() << "no CUDA device visible (cudaGetDeviceCount reports none): the CUDA kernel "
                      "tests run on a GPU machine (scripts/gpu/device_check.sh)";
    }
  }
};

// Device memory holding n values of T, freed on destruction.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    void* raw = nullptr;
    LM_CUDA_CHECK(cudaMalloc(&raw, std::max<size_t>(n, 1) * sizeof(T)));
    ptr_ = static_cast<T*>(raw);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (n_ > 0)
      LM_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    LM_CUDA_CHECK(cudaDeviceSynchronize());
    if (n_ > 0)
      LM_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t n_;
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Every |actual - expected| <= abs_tol + rel_tol * |expected|; reports the worst element.
inline void expect_near_all(const std::vector<float>& actual, const std::vector<float>& expected,
                            float abs_tol, float rel_tol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t worst = 0;
  double worst_excess = -1.0;
  size_t failures = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    const double allowed = abs_tol + rel_tol * std::fabs(expected[i]);
    if (!(diff <= allowed)) ++failures;  // NaN counts as a failure
    const double excess = std::isnan(diff) ? 1e30 : diff - allowed;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  EXPECT_EQ(failures, 0u) << what << ": worst at " << worst << ": got " << actual[worst]
                          << ", want " << expected[worst] << " (abs " << abs_tol << ", rel "
                          << rel_tol << ")";
}

}  // namespace lm::kernels::cuda::testing
