#include "ops/convert_weight.h"

#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "kernels/cpu/row_format.h"
#include "ops/linear.h"

namespace lm::ops {
namespace {

// Writes w (2-D rows of a float dtype) as `dtype` to dst: each row read as fp32, then written by
// encode(row, out_row, cols). Returns the view of dst.
template <typename Encode>
Tensor encode_rows(const Tensor& w, DType dtype, void* dst, const Encode& encode) {
  const int64_t rows = w.dim(0), cols = w.dim(1);
  const auto format = row_format(w.dtype);
  LM_CHECK(format.has_value());
  Tensor out{dtype, w.shape, dst, w.device};
  const auto* src = static_cast<const uint8_t*>(w.data);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    kernels::dequantize_row(*format, src + r * w.row_bytes(), row.data(), cols);
    encode(row.data(), static_cast<uint8_t*>(dst) + r * out.row_bytes(), cols);
  }
  return out;
}

}  // namespace

bool is_float_weight_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

Tensor convert_weight(const Tensor& w, DType dtype, void* dst) {
  LM_CHECK(w.rank() == 2 && w.layout == WeightLayout::kRows);
  LM_CHECK(is_float_weight_dtype(w.dtype) && is_float_weight_dtype(dtype));
  // Through fp32, which holds every F16 and BF16 value exactly: widening is lossless.
  return encode_rows(w, dtype, dst, [&](const float* row, void* out_row, int64_t cols) {
    if (dtype == DType::kF32) {
      std::memcpy(out_row, row, static_cast<size_t>(cols) * sizeof(float));
      return;
    }
    auto* halves = static_cast<uint16_t*>(out_row);
    for (int64_t c = 0; c < cols; ++c)
      halves[c] = dtype == DType::kF16 ? fp32_to_fp16(row[c]) : fp32_to_bf16(row[c]);
  });
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
  using Quantizer = void (*)(const float*, void*, int64_t);
  const Quantizer quantize_row = block == DType::kQ8_0   ? kernels::quantize_row_q8_0
                                 : block == DType::kQ4_0 ? kernels::quantize_row_q4_0
                                 : block == DType::kQ4_1 ? kernels::quantize_row_q4_1
                                 : block == DType::kQ5_0 ? kernels::quantize_row_q5_0
                                                         : kernels::quantize_row_q5_1;
  return encode_rows(w, block, dst, quantize_row);
}

}  // namespace lm::ops
