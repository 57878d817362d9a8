#include "ops/convert_weight.h"

#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "kernels/cpu/row_format.h"
#include "ops/linear.h"

namespace lm::ops {

bool is_float_weight_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

Tensor convert_weight(const Tensor& w, DType dtype, void* dst) {
  LM_CHECK(w.rank() == 2 && w.layout == WeightLayout::kRows);
  LM_CHECK(is_float_weight_dtype(w.dtype) && is_float_weight_dtype(dtype));
  const int64_t rows = w.dim(0), cols = w.dim(1);
  const auto format = row_format(w.dtype);
  LM_CHECK(format.has_value());
  Tensor out{dtype, w.shape, dst, w.device};
  const auto* src = static_cast<const uint8_t*>(w.data);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    // Through fp32, which holds every F16 and BF16 value exactly: widening is lossless.
    kernels::dequantize_row(*format, src + r * w.row_bytes(), row.data(), cols);
    auto* out_row = static_cast<uint8_t*>(dst) + r * out.row_bytes();
    if (dtype == DType::kF32) {
      std::memcpy(out_row, row.data(), row.size() * sizeof(float));
      continue;
    }
    auto* halves = reinterpret_cast<uint16_t*>(out_row);
    for (int64_t c = 0; c < cols; ++c) {
      const float x = row[static_cast<size_t>(c)];
      halves[c] = dtype == DType::kF16 ? fp32_to_fp16(x) : fp32_to_bf16(x);
    }
  }
  return out;
}

}  // namespace lm::ops
