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

bool is_load_quantization_dtype(DType dtype) {
  return dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_1 ||
         dtype == DType::kQ5_0 || dtype == DType::kQ5_1;
}

bool can_quantize_weight(const Tensor& w, DType block) {
  return is_load_quantization_dtype(block) && w.rank() == 2 && w.layout == WeightLayout::kRows &&
         is_float_weight_dtype(w.dtype) && w.dim(1) % dtype_info(block).block_size == 0;
}

Tensor quantize_weight(const Tensor& w, DType block, void* dst) {
  LM_CHECK(can_quantize_weight(w, block));
  const int64_t rows = w.dim(0), cols = w.dim(1);
  const auto format = row_format(w.dtype);
  LM_CHECK(format.has_value());
  using Quantizer = void (*)(const float*, void*, int64_t);
  const Quantizer quantize_row = block == DType::kQ8_0   ? kernels::quantize_row_q8_0
                                 : block == DType::kQ4_0 ? kernels::quantize_row_q4_0
                                 : block == DType::kQ4_1 ? kernels::quantize_row_q4_1
                                 : block == DType::kQ5_0 ? kernels::quantize_row_q5_0
                                                         : kernels::quantize_row_q5_1;
  Tensor out{block, w.shape, dst, w.device};
  const auto* src = static_cast<const uint8_t*>(w.data);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    kernels::dequantize_row(*format, src + r * w.row_bytes(), row.data(), cols);
    quantize_row(row.data(), static_cast<uint8_t*>(dst) + r * out.row_bytes(), cols);
  }
  return out;
}

}  // namespace lm::ops
