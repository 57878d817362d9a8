// The dequantizing GEMV against the CPU's scalar dot_row (fp32 activations) for every supported
// row format, on GGML-quantized random weights, aligned and unaligned rows, with and without bias.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "cuda_test_util.h"
#include "kernels/cpu/row_format.h"
#include "kernels/cuda/dequant_gemv.h"

namespace lm::kernels::cuda {
namespace {

using testing::CudaKernelTest;
using testing::DeviceBuffer;
using testing::make_weights;
using testing::random_floats;

using GemvTest = CudaKernelTest;

void check_gemv(RowFormat format, int64_t n, int64_t k, int64_t pad_bytes, bool with_bias) {
  SCOPED_TRACE(std::string(row_format_info(format).name) + " n " + std::to_string(n) + " k " +
               std::to_string(k) + " pad " + std::to_string(pad_bytes));
  const int64_t stride = row_bytes(format, k) + pad_bytes;
  const auto values = random_floats(n * k, static_cast<uint32_t>(n + k), -1, 1);
  const auto w = make_weights(format, values, n, k, stride);
  const auto x = random_floats(k, 40, -2, 2);
  const auto bias = random_floats(n, 41, -1, 1);
  std::vector<float> expected(n);
  std::vector<float> abs_x(k);
  for (int64_t i = 0; i < k; ++i) abs_x[i] = std::fabs(x[i]);
  std::vector<float> bound(n);  // sum |w x|, the scale of the rounding error
  std::vector<float> row(k);
  for (int64_t j = 0; j < n; ++j) {
    expected[j] = dot_row(format, w.data() + j * stride, x.data(), k, Isa::kScalar) +
                  (with_bias ? bias[j] : 0.0f);
    dequantize_row(format, w.data() + j * stride, row.data(), k, Isa::kScalar);
    double b = 0;
    for (int64_t i = 0; i < k; ++i) b += std::fabs(row[i]) * abs_x[i];
    bound[j] = static_cast<float>(b);
  }
  DeviceBuffer<uint8_t> d_w(w);
  DeviceBuffer<float> d_x(x), d_y(n), d_bias(bias);
  dequant_gemv(format, d_w.get(), stride, d_x.get(), d_y.get(), n, k,
               with_bias ? d_bias.get() : nullptr, nullptr);
  const auto got = d_y.download();
  for (int64_t j = 0; j < n; ++j) {
    // fp32 sums of k products in another order (per block, then per lane, then a tree): the
    // error grows like sqrt(k) ulp of sum |w x|; 1e-5 * sum|w x| is ~10x that bound at k = 11008.
    ASSERT_NEAR(got[j], expected[j], 1e-5f * bound[j] + 1e-5f) << "row " << j;
  }
}

TEST_F(GemvTest, BlockFormatsMatchCpu) {
  for (RowFormat f : {RowFormat::kQ8_0, RowFormat::kQ4_0, RowFormat::kQ4_1}) {
    check_gemv(f, 37, 4096, 0, false);    // n not a multiple of the 8 rows per block
    check_gemv(f, 64, 32 * 45, 0, true);  // k = 45 blocks: lanes own unequal block counts
    check_gemv(f, 11, 32, 2, true);       // one block per row, padded rows
  }
  check_gemv(RowFormat::kQ4_0, 300, 11008, 0, false);  // the 7B down projection's k
}

TEST_F(GemvTest, FloatFormatsMatchCpuOnVectorAndScalarPaths) {
  for (RowFormat f : {RowFormat::kF16, RowFormat::kBF16, RowFormat::kF32}) {
    check_gemv(f, 45, 4096, 0, true);  // 16-byte aligned rows: vector path
    check_gemv(f, 9, 40, 0, false);    // f16/bf16 row of 80 bytes: scalar path
    check_gemv(f, 13, 1000, 2, true);  // padded, unaligned rows
  }
}

}  // namespace
}  // namespace lm::kernels::cuda
