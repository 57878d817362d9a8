// The form every FP8 Linear of a pre-quantized checkpoint (transformers' / AutoFP8's "fp8",
// "fbgemm_fp8", compressed-tensors float-quantized) reduces to once read: E4M3 or E5M2 values and a
// grid of scales, each scale covering one block of rows x columns (a whole tensor, one row, a
// group of a row's columns, or a 2-D block). Each weight is its value times its scale in fp32, as
// TGI's and vLLM's FP8 kernels apply the scales (transformers on a CPU, and compressed-tensors'
// decompression, hold it rounded to the model's dtype). Served as stored: the checkpoint's bytes
// with their scales (Tensor::fp8_scales), which the model packs into FP8 panels; or, for a Linear
// whose rows do not fill whole panels, those weights in fp32 rows, computed once at load.
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
};

// Rows a Linear needs in multiples of to run as FP8 panels (kernels/cpu/panels16.h's
// kPanel16Rows).
inline constexpr int64_t kFp8PanelRows = 16;

// The weight as stored (dtype F8_E4M3 / F8_E5M2, pointing at w.values) with its Fp8Scales (the
// storage).
RepackedLinear fp8_weight_as_stored(const Fp8Linear& w);

// Each weight as fp8 * scale in fp32 (the product rounded once), in fp32 rows.
RepackedLinear dequantize_fp8_linear(const Fp8Linear& w);

}  // namespace lm
