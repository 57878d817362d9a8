// The batched Linear's operands (weight rows dequantized to fp16, activations rounded to fp16 /
// bf16) and the row moves (logits rows gathered, biases added) against their CPU twins:
// dequantize_row and the fp16 / bf16 roundings of base/fp16.h, bit for bit.
#include <gtest/gtest.h>

#include "base/fp16.h"
#include "cuda_test_util.h"
#include "kernels/cpu/row_format.h"
#include "kernels/cuda/rows.h"
#include "kernels/cuda/weight_dequantize.h"

namespace lm::kernels::cuda {
namespace {

using testing::CudaKernelTest;
using testing::DeviceBuffer;
using testing::make_weights;
using testing::random_floats;

using WeightDequantizeTest = CudaKernelTest;

TEST_F(WeightDequantizeTest, RowsDequantizeToTheCpuValuesRoundedToFp16) {
  const int64_t rows = 13, k = 96;
  const std::vector<float> values = random_floats(static_cast<size_t>(rows * k), 7, -3.0f, 3.0f);
  for (RowFormat format : {RowFormat::kF32, RowFormat::kF16, RowFormat::kBF16, RowFormat::kQ8_0,
                           RowFormat::kQ4_0, RowFormat::kQ4_1}) {
    SCOPED_TRACE(row_format_info(format).name);
    ASSERT_TRUE(dequantize_supports(format));
    const std::vector<uint8_t> host = make_weights(format, values, rows, k, row_bytes(format, k));
    DeviceBuffer<uint8_t> w(host);
    DeviceBuffer<uint16_t> out(static_cast<size_t>(rows * k));
    dequantize_rows_f16(format, w.get(), row_bytes(format, k), out.get(), rows, k, nullptr);
    const std::vector<uint16_t> got = out.download();
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(format, host.data() + r * row_bytes(format, k), row.data(), k);
      for (int64_t i = 0; i < k; ++i)
        ASSERT_EQ(got[static_cast<size_t>(r * k + i)], fp32_to_fp16(row[static_cast<size_t>(i)]))
            << "row " << r << " element " << i;
    }
  }
  EXPECT_FALSE(dequantize_supports(RowFormat::kQ4_K));
}

TEST_F(WeightDequantizeTest, ActivationsRoundToNearestEven) {
  const std::vector<float> x = random_floats(1000, 3, -70000.0f, 70000.0f);
  DeviceBuffer<float> in(x);
  for (bool bf16 : {false, true}) {
    DeviceBuffer<uint16_t> out(x.size());
    round_activations(in.get(), out.get(), static_cast<int64_t>(x.size()), bf16, nullptr);
    const std::vector<uint16_t> got = out.download();
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(got[i], bf16 ? fp32_to_bf16(x[i]) : fp32_to_fp16(x[i])) << i << " " << x[i];
  }
}

TEST_F(WeightDequantizeTest, RowsAreGatheredAndBiasesAdded) {
  const int64_t n = 40;
  const std::vector<float> x = random_floats(static_cast<size_t>(6 * n), 11);
  const std::vector<int32_t> rows = {5, 0, 3};
  DeviceBuffer<float> in(x);
  DeviceBuffer<int32_t> which(rows);
  DeviceBuffer<float> out(static_cast<size_t>(3 * n));
  gather_rows(in.get(), which.get(), out.get(), 3, n, nullptr);
  const std::vector<float> bias = random_floats(static_cast<size_t>(n), 12);
  DeviceBuffer<float> b(bias);
  add_bias_rows(out.get(), b.get(), 3, n, nullptr);
  const std::vector<float> got = out.download();
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(got[r * n + static_cast<size_t>(j)],
                x[static_cast<size_t>(rows[r] * n + j)] + bias[static_cast<size_t>(j)]);
}

}  // namespace
}  // namespace lm::kernels::cuda
