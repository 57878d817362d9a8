// Shared pieces of the CUDA kernel tests: a fixture that skips without a device, device buffers
// that upload/download std::vectors, seeded random data, and a tolerance check that reports the
// worst element.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "kernels/cpu/row_format.h"
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

// n rows of k values in `format` (GGML's reference quantizers for the block formats), each row
// padded to row_stride bytes.
inline std::vector<uint8_t> make_weights(RowFormat format, const std::vector<float>& values,
                                         int64_t n, int64_t k, int64_t row_stride) {
  std::vector<uint8_t> w(static_cast<size_t>(n * row_stride), 0);
  for (int64_t j = 0; j < n; ++j) {
    const float* src = values.data() + j * k;
    uint8_t* dst = w.data() + j * row_stride;
    switch (format) {
      case RowFormat::kQ8_0:
        quantize_row_q8_0(src, dst, k);
        break;
      case RowFormat::kQ4_0:
        quantize_row_q4_0(src, dst, k);
        break;
      case RowFormat::kQ4_1:
        quantize_row_q4_1(src, dst, k);
        break;
      case RowFormat::kF32:
        std::memcpy(dst, src, static_cast<size_t>(k) * 4);
        break;
      default:
        for (int64_t i = 0; i < k; ++i) {
          const uint16_t h =
              format == RowFormat::kF16 ? fp32_to_fp16(src[i]) : fp32_to_bf16(src[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
    }
  }
  return w;
}

}  // namespace lm::kernels::cuda::testing
