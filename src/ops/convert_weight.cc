#include "ops/convert_weight.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "kernels/cpu/eetq.h"
#include "kernels/cpu/fp8_quantize.h"
#include "kernels/cpu/llm_int8.h"
#include "kernels/cpu/panels16.h"
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
  switch (dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kNF4:
    case DType::kFP4:
    case DType::kF8_E4M3:
      return true;
    default:
      return false;
  }
}

namespace {

bool rows_are_blocks(const Tensor& w, DType block) {
  return w.dim(1) % dtype_info(block).block_size == 0;
}

// llama.cpp's fallback for a K-quant whose rows are not whole 256-value super-blocks.
std::optional<DType> kquant_fallback(DType block) {
  if (block == DType::kQ4_K) return DType::kQ5_0;
  if (block == DType::kQ5_K) return DType::kQ5_1;
  if (block == DType::kQ6_K) return DType::kQ8_0;
  return std::nullopt;
}

}  // namespace

std::optional<DType> load_quantization_target(const Tensor& w, DType requested) {
  if (!is_load_quantization_dtype(requested) || w.rank() != 2 || w.layout != WeightLayout::kRows ||
      !is_float_weight_dtype(w.dtype)) {
    return std::nullopt;
  }
  if (requested == DType::kF8_E4M3) {  // run as FP8 panels of 16 rows (kernels/cpu/panels_fp8.h)
    return w.dim(0) % kernels::kPanel16Rows == 0 ? std::optional<DType>(requested) : std::nullopt;
  }
  if (rows_are_blocks(w, requested)) return requested;
  const std::optional<DType> fallback = kquant_fallback(requested);
  if (fallback && rows_are_blocks(w, *fallback)) return fallback;
  return std::nullopt;
}

Tensor quantize_weight(const Tensor& w, DType block, void* dst, RowQuantizer quantizer,
                       float* scales) {
  LM_CHECK(load_quantization_target(w, block) == block);
  if (quantizer == RowQuantizer::kFp8Tensor) {
    LM_CHECK(block == DType::kF8_E4M3 && scales != nullptr);
    // TGI computes in the weight's dtype; its values are exact in fp32.
    const kernels::Round16 dtype = w.dtype == DType::kBF16  ? kernels::Round16::kBF16
                                   : w.dtype == DType::kF16 ? kernels::Round16::kF16
                                                            : kernels::Round16::kNone;
    float absmax = 0.0f;
    encode_rows(w, block, dst, [&](const float* row, void*, int64_t cols) {
      for (int64_t i = 0; i < cols; ++i) absmax = std::max(absmax, std::abs(row[i]));
    });
    const float scale = kernels::fp8_tensor_scale(absmax, dtype);
    scales[0] = 1.0f / scale;
    return encode_rows(w, block, dst, [&](const float* row, void* out_row, int64_t cols) {
      kernels::quantize_row_fp8(row, cols, scale, dtype, static_cast<uint8_t*>(out_row));
    });
  }
  if (quantizer == RowQuantizer::kEetq) {
    LM_CHECK(block == DType::kQ8_0);
    return encode_rows(w, block, dst, kernels::quantize_row_eetq);
  }
  if (quantizer == RowQuantizer::kLlmInt8) {
    LM_CHECK(block == DType::kQ8_0 && scales != nullptr);
    int64_t row = 0;  // encode_rows writes the rows in order
    Tensor out = encode_rows(w, block, dst, [&](const float* src, void* out_row, int64_t cols) {
      scales[row++] = kernels::quantize_row_llm_int8(src, out_row, cols);
    });
    out.int8_row_absmax = scales;
    return out;
  }
  using Quantizer = void (*)(const float*, void*, int64_t);
  Quantizer quantize_row = nullptr;
  switch (block) {
    case DType::kQ8_0:
      quantize_row = kernels::quantize_row_q8_0;
      break;
    case DType::kQ4_0:
      quantize_row = kernels::quantize_row_q4_0;
      break;
    case DType::kQ4_1:
      quantize_row = kernels::quantize_row_q4_1;
      break;
    case DType::kQ5_0:
      quantize_row = kernels::quantize_row_q5_0;
      break;
    case DType::kQ5_1:
      quantize_row = kernels::quantize_row_q5_1;
      break;
    case DType::kQ4_K:
      quantize_row = [](const float* x, void* y, int64_t k) {
        kernels::quantize_row_q4_k(x, y, k);
      };
      break;
    case DType::kQ5_K:
      quantize_row = [](const float* x, void* y, int64_t k) {
        kernels::quantize_row_q5_k(x, y, k);
      };
      break;
    case DType::kQ6_K:
      quantize_row = [](const float* x, void* y, int64_t k) {
        kernels::quantize_row_q6_k(x, y, k);
      };
      break;
    case DType::kNF4:
      quantize_row = kernels::quantize_row_nf4;
      break;
    default:
      quantize_row = kernels::quantize_row_fp4;
      break;
  }
  return encode_rows(w, block, dst, quantize_row);
}

}  // namespace lm::ops
