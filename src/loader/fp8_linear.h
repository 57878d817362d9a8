// The form every FP8 Linear of a pre-quantized checkpoint (transformers' / AutoFP8's "fp8",
// "fbgemm_fp8", compressed-tensors float-quantized) reduces to once read: E4M3 or E5M2 values and a
// grid of scales, each scale covering one block of rows x columns (a whole tensor, one row, a
// group of a row's columns, or a 2-D block). Served as stored: the checkpoint's bytes with their
// scales (Tensor::fp8_scales), which the model packs into FP8 panels whose kernels compute each
// weight as the libraries dequantize it on a CPU (transformers dequantizes FP8 checkpoints there;
// compressed-tensors decompresses them) -- the same bits, from 1 byte a weight. Or, for a Linear
// whose rows do not fill whole panels, that dequantization done once at load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "loader/integer_linear.h"
#include "tensor/dtype.h"

namespace lm {

// w[n][k] = fp8(values[n * cols + k]) * scales[(n / block_rows) * grid_cols + k / block_cols]
struct Fp8Linear {
  int64_t rows = 0;                 // out_features
  int64_t cols = 0;                 // in_features
  DType format = DType::kF8_E4M3;   // or kF8_E5M2
  const uint8_t* values = nullptr;  // [rows, cols], the checkpoint's bytes (no NaN, no infinity)
  int64_t block_rows = 1, block_cols = 1;  // the last block of a row / column may be cut short
  int64_t grid_cols = 1;                   // ceil(cols / block_cols)
  std::vector<float> scales;               // [ceil(rows / block_rows), grid_cols], finite
  DType scale_dtype = DType::kF32;         // the scales' stored dtype (F32, F16 or BF16)
};

// Rows a Linear needs in multiples of to run as FP8 panels (kernels/cpu/panels16.h's
// kPanel16Rows).
inline constexpr int64_t kFp8PanelRows = 16;

// The weight as stored (dtype F8_E4M3 / F8_E5M2, pointing at w.values) with its Fp8Scales (the
// storage): rounded after the scale first to the scale's dtype when `round_to_scale_dtype`
// (compressed-tensors), then to `dtype` (the model's: BF16, F16, or F32 for none).
RepackedLinear fp8_weight_as_stored(const Fp8Linear& w, DType dtype, bool round_to_scale_dtype);

// Each weight as fp8 * scale in fp32 (exact when the scale is a 16-bit value: at most 4 + 11
// significant bits), then rounded to nearest even: first to the scale's dtype when
// `round_to_scale_dtype` (compressed-tensors multiplies in the scale's dtype), then to `dtype`
// (BF16, F16 or F32: the model's). The result is a plain [rows, cols] weight in rows.
RepackedLinear dequantize_fp8_linear(const Fp8Linear& w, DType dtype, bool round_to_scale_dtype);

}  // namespace lm
