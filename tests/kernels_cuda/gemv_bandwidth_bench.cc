// kernels_cuda_bench: device copy bandwidth (cudaMemcpy device to device) and the achieved weight
// bandwidth of dequant_gemv on Llama-7B-sized projections, as a fraction of the copy bandwidth.
// Decode is bound by reading the weights once per token, so this fraction is the GEMV's grade.
// Usage: kernels_cuda_bench [results.jsonl]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "kernels/cpu/row_format.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dequant_gemv.h"
#include "kernels/cuda/device_info.h"

namespace {

using lm::kernels::RowFormat;

// Seconds per call of fn, timed with events over `iterations` calls after a warm-up.
template <typename Fn>
double time_per_call(int iterations, Fn fn) {
  fn(0);
  LM_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  LM_CUDA_CHECK(cudaEventCreate(&start));
  LM_CUDA_CHECK(cudaEventCreate(&stop));
  LM_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iterations; ++i) fn(i);
  LM_CUDA_CHECK(cudaEventRecord(stop));
  LM_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  LM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  LM_CUDA_CHECK(cudaEventDestroy(start));
  LM_CUDA_CHECK(cudaEventDestroy(stop));
  return static_cast<double>(ms) / 1e3 / iterations;
}

// n rows of k quantized from a small set of random rows, tiled (bandwidth does not care).
std::vector<uint8_t> make_weights(RowFormat format, int64_t n, int64_t k) {
  const int64_t rb = lm::kernels::row_bytes(format, k);
  constexpr int64_t kDistinct = 16;
  std::vector<uint8_t> distinct(static_cast<size_t>(kDistinct * rb));
  std::vector<float> values(static_cast<size_t>(k));
  uint32_t state = 12345;
  for (int64_t r = 0; r < kDistinct; ++r) {
    for (float& v : values) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(state >> 8) / 16777216.0f * 2.0f - 1.0f;
    }
    uint8_t* dst = distinct.data() + r * rb;
    switch (format) {
      case RowFormat::kQ8_0:
        lm::kernels::quantize_row_q8_0(values.data(), dst, k);
        break;
      case RowFormat::kQ4_0:
        lm::kernels::quantize_row_q4_0(values.data(), dst, k);
        break;
      case RowFormat::kQ4_1:
        lm::kernels::quantize_row_q4_1(values.data(), dst, k);
        break;
      default:
        for (int64_t i = 0; i < k; ++i) {
          const uint16_t h =
              format == RowFormat::kF16 ? lm::fp32_to_fp16(values[i]) : lm::fp32_to_bf16(values[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
    }
  }
  std::vector<uint8_t> w(static_cast<size_t>(n * rb));
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(w.data() + r * rb, distinct.data() + (r % kDistinct) * rb, static_cast<size_t>(rb));
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (lm::kernels::cuda::device_count() == 0) {
    std::fprintf(stderr, "kernels_cuda_bench: no CUDA device visible\n");
    return 1;
  }
  FILE* json = argc > 1 ? std::fopen(argv[1], "w") : nullptr;
  std::printf("device: %s\n", lm::kernels::cuda::device_description(0).c_str());

  // Copy bandwidth: bytes read + bytes written per second, on buffers far larger than L2.
  const size_t copy_bytes = size_t{1} << 30;
  void* src = nullptr;
  void* dst = nullptr;
  LM_CUDA_CHECK(cudaMalloc(&src, copy_bytes));
  LM_CUDA_CHECK(cudaMalloc(&dst, copy_bytes));
  LM_CUDA_CHECK(cudaMemset(src, 1, copy_bytes));
  const double copy_s = time_per_call(20, [&](int) {
    LM_CUDA_CHECK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice));
  });
  const double copy_gbps = 2.0 * static_cast<double>(copy_bytes) / copy_s / 1e9;
  std::printf("copy D2D: %.1f GB/s (read + write)\n", copy_gbps);
  if (json) std::fprintf(json, "{\"bench\": \"copy_d2d\", \"gb_per_s\": %.2f}\n", copy_gbps);
  LM_CUDA_CHECK(cudaFree(src));
  LM_CUDA_CHECK(cudaFree(dst));

  struct Shape {
    const char* name;
    int64_t n, k;
  };
  const Shape shapes[] = {{"gate/up 11008x4096", 11008, 4096}, {"down 4096x11008", 4096, 11008}};
  const RowFormat formats[] = {RowFormat::kQ4_0, RowFormat::kQ4_1, RowFormat::kQ8_0,
                               RowFormat::kF16, RowFormat::kBF16};
  for (const Shape& shape : shapes) {
    for (RowFormat format : formats) {
      const std::vector<uint8_t> w = make_weights(format, shape.n, shape.k);
      const int64_t rb = lm::kernels::row_bytes(format, shape.k);
      // Enough copies that their total exceeds any L2 (H200: 60 MiB), so every call reads HBM.
      const size_t copies = std::max<size_t>(2, (size_t{512} << 20) / w.size() + 1);
      std::vector<void*> d_w(copies);
      for (void*& p : d_w) {
        LM_CUDA_CHECK(cudaMalloc(&p, w.size()));
        LM_CUDA_CHECK(cudaMemcpy(p, w.data(), w.size(), cudaMemcpyHostToDevice));
      }
      void* x_raw = nullptr;
      void* y_raw = nullptr;
      LM_CUDA_CHECK(cudaMalloc(&x_raw, static_cast<size_t>(shape.k) * 4));
      LM_CUDA_CHECK(cudaMalloc(&y_raw, static_cast<size_t>(shape.n) * 4));
      auto* d_x = static_cast<float*>(x_raw);
      auto* d_y = static_cast<float*>(y_raw);
      LM_CUDA_CHECK(cudaMemset(d_x, 0, static_cast<size_t>(shape.k) * 4));
      const double s = time_per_call(200, [&](int i) {
        lm::kernels::cuda::dequant_gemv(format, d_w[static_cast<size_t>(i) % copies], rb, d_x, d_y,
                                        shape.n, shape.k, nullptr, nullptr);
      });
      const double bytes =
          static_cast<double>(w.size()) + 4.0 * static_cast<double>(shape.k + shape.n);
      const double gbps = bytes / s / 1e9;
      const char* format_name = lm::kernels::row_format_info(format).name;
      std::printf("gemv %-20s %-5s %8.1f us  %7.1f GB/s  %5.1f%% of copy\n", shape.name,
                  format_name, s * 1e6, gbps, 100.0 * gbps / copy_gbps);
      if (json) {
        std::fprintf(json,
                     "{\"bench\": \"dequant_gemv\", \"shape\": \"%s\", \"format\": \"%s\", "
                     "\"us\": %.2f, \"gb_per_s\": %.2f, \"fraction_of_copy\": %.4f}\n",
                     shape.name, format_name, s * 1e6, gbps, gbps / copy_gbps);
      }
      for (void* p : d_w) LM_CUDA_CHECK(cudaFree(p));
      LM_CUDA_CHECK(cudaFree(d_x));
      LM_CUDA_CHECK(cudaFree(d_y));
    }
  }
  if (json) std::fclose(json);
  return 0;
}
