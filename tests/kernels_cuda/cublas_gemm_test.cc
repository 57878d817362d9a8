// The cuBLAS GEMM wrapper against the CPU matmul on the same bf16/f16 values, checking the
// row-major Y = X . W^T mapping (transposes, leading dimensions) on non-square shapes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "cuda_test_util.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cuda/cublas_gemm.h"

namespace lm::kernels::cuda {
namespace {

using testing::CudaKernelTest;
using testing::DeviceBuffer;
using testing::random_floats;

using CublasGemmTest = CudaKernelTest;

void check_gemm(GemmType type, int64_t m, int64_t n, int64_t k) {
  SCOPED_TRACE("m " + std::to_string(m) + " n " + std::to_string(n) + " k " + std::to_string(k));
  const bool bf16 = type == GemmType::kBF16;
  auto to_bits = [bf16](float v) { return bf16 ? fp32_to_bf16(v) : fp32_to_fp16(v); };
  auto from_bits = [bf16](uint16_t b) { return bf16 ? bf16_to_fp32(b) : fp16_to_fp32(b); };
  const auto xf = random_floats(m * k, 50, -1, 1);
  const auto wf = random_floats(n * k, 51, -1, 1);
  std::vector<uint16_t> x(xf.size()), w(wf.size());
  std::vector<float> x_rounded(xf.size());
  for (size_t i = 0; i < xf.size(); ++i) {
    x[i] = to_bits(xf[i]);
    x_rounded[i] = from_bits(x[i]);  // the CPU multiplies the very values the GPU sees
  }
  for (size_t i = 0; i < wf.size(); ++i) w[i] = to_bits(wf[i]);
  std::vector<float> expected(m * n);
  ThreadPool pool(0);
  matmul(bf16 ? RowFormat::kBF16 : RowFormat::kF16, w.data(), 2 * k, x_rounded.data(),
         expected.data(), m, n, k, pool, nullptr, Isa::kScalar);

  DeviceBuffer<uint16_t> d_x(x), d_w(w), d_y16(m * n);
  DeviceBuffer<float> d_y(m * n);
  CublasGemm gemm;
  gemm.matmul_f32_out(type, d_x.get(), d_w.get(), d_y.get(), m, n, k, nullptr);
  const auto got = d_y.download();
  // Products of 8/11-bit-mantissa values are exact in fp32; only the accumulation order differs
  // (cuBLAS may split k), costing ~sqrt(k) ulp of partial sums of size ~sqrt(k) / 3: ~1e-4 at
  // k = 4096. 2e-6 * k is ~100x that, and a wrong transpose or stride errs by O(1).
  const float tol = 2e-6f * static_cast<float>(k);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], tol) << i;

  gemm.matmul(type, d_x.get(), d_w.get(), d_y16.get(), m, n, k, nullptr);
  const auto got16 = d_y16.download();
  for (size_t i = 0; i < got16.size(); ++i) {
    // One rounding to the output type on top: half an ulp of bf16 (2^-9) or f16 (2^-12).
    const float ulp = bf16 ? 1.0f / 256 : 1.0f / 2048;
    ASSERT_NEAR(from_bits(got16[i]), expected[i], tol + ulp * std::fabs(expected[i])) << i;
  }
}

TEST_F(CublasGemmTest, Bf16AndF16MatchCpuMatmul) {
  for (GemmType type : {GemmType::kBF16, GemmType::kF16}) {
    check_gemm(type, 1, 256, 128);
    check_gemm(type, 7, 96, 4096);
    check_gemm(type, 33, 1000, 200);
  }
}

}  // namespace
}  // namespace lm::kernels::cuda
