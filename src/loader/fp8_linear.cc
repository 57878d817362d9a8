#include "loader/fp8_linear.h"

#include <cstring>

#include "base/check.h"
#include "base/fp16.h"

namespace lm {
namespace {

float round_to(DType dtype, float x) {
  return dtype == DType::kBF16 ? round_to_bf16(x) : dtype == DType::kF16 ? round_to_fp16(x) : x;
}

}  // namespace

RepackedLinear fp8_weight_as_stored(const Fp8Linear& w, DType dtype, bool round_to_scale_dtype) {
  LM_CHECK(dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF32);
  auto scales = std::make_shared<Fp8Scales>();
  scales->grid = w.scales;
  scales->block_rows = w.block_rows;
  scales->block_cols = w.block_cols;
  scales->grid_cols = w.grid_cols;
  scales->round_first = round_to_scale_dtype ? w.scale_dtype : DType::kF32;
  scales->round_to = dtype;
  Tensor weight{w.format, {w.rows, w.cols}, const_cast<uint8_t*>(w.values), Device::kCpu};
  weight.fp8_scales = scales.get();
  return {weight, std::move(scales)};
}

RepackedLinear dequantize_fp8_linear(const Fp8Linear& w, DType dtype, bool round_to_scale_dtype) {
  LM_CHECK(dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF32);
  LM_CHECK(w.format == DType::kF8_E4M3 || w.format == DType::kF8_E5M2);
  // Every byte's value once: the conversion is then one lookup and one multiply a weight.
  float value_of[256];
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    value_of[b] = w.format == DType::kF8_E4M3 ? fp8_e4m3_to_fp32(byte) : fp8_e5m2_to_fp32(byte);
  }
  const size_t element_bytes = dtype == DType::kF32 ? 4 : 2;
  auto bytes = std::make_shared<Buffer>(Buffer::of_bytes(
      static_cast<int64_t>(element_bytes) * w.rows * w.cols, Buffer::Pages::kHuge));
  auto* out = static_cast<uint8_t*>(bytes->view().data);
  for (int64_t n = 0; n < w.rows; ++n) {
    const uint8_t* q = w.values + n * w.cols;
    const float* scales = w.scales.data() + (n / w.block_rows) * w.grid_cols;
    uint8_t* row = out + static_cast<size_t>(n * w.cols) * element_bytes;
    for (int64_t k = 0; k < w.cols; ++k) {
      float v = value_of[q[k]] * scales[k / w.block_cols];
      if (round_to_scale_dtype) v = round_to(w.scale_dtype, v);
      if (dtype == DType::kF32) {
        std::memcpy(row + 4 * k, &v, 4);
      } else {
        const uint16_t h = dtype == DType::kBF16 ? fp32_to_bf16(v) : fp32_to_fp16(v);
        std::memcpy(row + 2 * k, &h, 2);
      }
    }
  }
  Tensor weight{dtype, {w.rows, w.cols}, out, Device::kCpu};
  return {weight, std::move(bytes)};
}

}  // namespace lm
