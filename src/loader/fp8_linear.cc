#include "loader/fp8_linear.h"

#include "base/check.h"
#include "base/fp16.h"

namespace lm {

RepackedLinear fp8_weight_as_stored(const Fp8Linear& w) {
  auto scales = std::make_shared<Fp8Scales>();
  scales->grid = w.scales;
  scales->block_rows = w.block_rows;
  scales->block_cols = w.block_cols;
  scales->grid_cols = w.grid_cols;
  Tensor weight{w.format, {w.rows, w.cols}, const_cast<uint8_t*>(w.values), Device::kCpu};
  weight.fp8_scales = scales.get();
  return {weight, std::move(scales)};
}

RepackedLinear dequantize_fp8_linear(const Fp8Linear& w) {
  LM_CHECK(is_fp8(w.format));
  // Every byte's value once: the conversion is then one lookup and one multiply a weight.
  float value_of[256];
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    value_of[b] = w.format == DType::kF8_E4M3 ? fp8_e4m3_to_fp32(byte) : fp8_e5m2_to_fp32(byte);
  }
  auto bytes =
      std::make_shared<Buffer>(Buffer({w.rows, w.cols}, DType::kF32, Buffer::Pages::kHuge));
  auto* out = static_cast<float*>(bytes->view().data);
  for (int64_t n = 0; n < w.rows; ++n) {
    const uint8_t* q = w.values + n * w.cols;
    const float* scales = w.scales.data() + (n / w.block_rows) * w.grid_cols;
    for (int64_t k = 0; k < w.cols; ++k)
      out[n * w.cols + k] = value_of[q[k]] * scales[k / w.block_cols];
  }
  Tensor weight{DType::kF32, {w.rows, w.cols}, out, Device::kCpu};
  return {weight, std::move(bytes)};
}

}  // namespace lm
