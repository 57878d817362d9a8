#include "ops/linear.h"

#include "kernels/cpu/llm_int8.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/panels_fp8.h"
#include "kernels/cpu/row_format.h"

namespace lm::ops {

std::optional<kernels::RowFormat> row_format(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return kernels::RowFormat::kF32;
    case DType::kF16:
      return kernels::RowFormat::kF16;
    case DType::kBF16:
      return kernels::RowFormat::kBF16;
    case DType::kQ8_0:
      return kernels::RowFormat::kQ8_0;
    case DType::kQ4_0:
      return kernels::RowFormat::kQ4_0;
    case DType::kQ4_1:
      return kernels::RowFormat::kQ4_1;
    case DType::kQ5_0:
      return kernels::RowFormat::kQ5_0;
    case DType::kQ5_1:
      return kernels::RowFormat::kQ5_1;
    case DType::kQ4_K:
      return kernels::RowFormat::kQ4_K;
    case DType::kQ5_K:
      return kernels::RowFormat::kQ5_K;
    case DType::kQ6_K:
      return kernels::RowFormat::kQ6_K;
    case DType::kQ2_K:
      return kernels::RowFormat::kQ2_K;
    case DType::kQ3_K:
      return kernels::RowFormat::kQ3_K;
    case DType::kIQ4_NL:
      return kernels::RowFormat::kIQ4_NL;
    case DType::kIQ4_XS:
      return kernels::RowFormat::kIQ4_XS;
    case DType::kNF4:
      return kernels::RowFormat::kNF4;
    case DType::kFP4:
      return kernels::RowFormat::kFP4;
    case DType::kQ4_Z128:
      return kernels::RowFormat::kQ4_Z128;
    default:
      return std::nullopt;
  }
}

namespace {

kernels::RowFormat checked_format(const Tensor& w) {
  auto format = row_format(w.dtype);
  LM_CHECK_MSG(format.has_value(), "weight dtype without a CPU kernel");
  return *format;
}

// The shapes and dtypes of one Linear; returns its bias as a pointer (or null).
const float* check_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  LM_CHECK(x.device == Device::kCpu && w.device == Device::kCpu && y.device == Device::kCpu);
  LM_CHECK(x.dtype == DType::kF32 && y.dtype == DType::kF32);
  LM_CHECK(x.rank() == 2 && w.rank() == 2 && y.rank() == 2);
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  LM_CHECK(w.dim(1) == k && y.dim(0) == m && y.dim(1) == n);
  if (bias.empty()) return nullptr;
  LM_CHECK(bias.dtype == DType::kF32 && bias.numel() == n);
  return bias.as<float>();
}

// x [m, k] with its columns in w's column_order (an act-order weight, tensor.h), into `storage`;
// x itself when w has none.
Tensor ordered_input(const Tensor& x, const Tensor& w, std::vector<float>& storage) {
  if (w.column_order == nullptr) return x;
  const int64_t m = x.dim(0), k = x.dim(1);
  storage.resize(static_cast<size_t>(m * k));
  const float* src = x.as<float>();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < k; ++j)
      storage[static_cast<size_t>(r * k + j)] = src[r * k + w.column_order[j]];
  return Tensor{DType::kF32, {m, k}, storage.data(), Device::kCpu};
}

// y = x . w^T + bias for an LLM.int8 weight (tensor.h): x's rows quantized as LLM.int8 does, the
// integer product with the rows' int8 values (the int8 GEMM, batch-invariant), each row's outliers
// added in float, each output scaled by its row's absmax / 127 (bitsandbytes' vectorwise
// dequantization) before the bias.
void linear_llm_int8(const Tensor& x, const Tensor& w, const float* bias, Tensor& y,
                     ThreadPool& pool) {
  const bool interleaved = w.layout == WeightLayout::kInterleaved8;
  LM_CHECK(w.dtype == DType::kQ8_0 && (interleaved || w.layout == WeightLayout::kRows) &&
           w.column_order == nullptr);
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  thread_local std::vector<kernels::BlockQ8Act> xq;
  thread_local kernels::LlmInt8Outliers this_threads_outliers;
  // A reference for the pool's threads: in their lambda the thread_local's name is their own.
  kernels::LlmInt8Outliers& outliers = this_threads_outliers;
  xq.resize(static_cast<size_t>(m * k / kernels::kQuantBlockSize));
  kernels::quantize_rows_llm_int8(x.as<float>(), m, k, xq.data(), outliers, &pool);
  float* out = y.as<float>();
  if (interleaved) {  // the interleaved int8 GEMM, as Q8_0 weights prepared for the CPU
    thread_local kernels::InterleavedInput input;
    input.prepare_quantized(xq.data(), m, k, pool);
    kernels::matmul_interleaved(kernels::RowFormat::kQ8_0, w.data, input, out, n, pool);
  } else {
    kernels::matmul_q8_act(kernels::RowFormat::kQ8_0, w.data, w.row_bytes(), xq.data(), out, m, n,
                           k, pool);
  }
  pool.parallel_for(n, [&](int64_t j0, int64_t j1) {
    kernels::add_llm_int8_outliers(outliers, w.data, interleaved, k, out, m, n, j0, j1);
    const float* absmax = w.int8_row_absmax;
    for (int64_t r = 0; r < m; ++r) {  // the branch out of the loops, which then vectorize
      float* yr = out + r * n;
      for (int64_t j = j0; j < j1; ++j) yr[j] *= absmax[j] * (1.0f / 127.0f);
      if (bias != nullptr)
        for (int64_t j = j0; j < j1; ++j) yr[j] += bias[j];
    }
  });
}

// The kernels' view of an FP8 weight in panels.
kernels::Fp8Panels fp8_panels(const Tensor& w) {
  LM_CHECK_MSG(w.fp8_scales != nullptr && w.layout == WeightLayout::kPanels16,
               "an FP8 weight runs in panels (ops::pack_fp8_weight)");
  const Fp8Scales& s = *w.fp8_scales;
  return {w.dtype == DType::kF8_E5M2 ? kernels::Fp8Format::kE5M2 : kernels::Fp8Format::kE4M3,
          static_cast<const uint8_t*>(w.data), s.lanes.data(), s.block_cols, s.grid_cols};
}

}  // namespace

bool supports_weight_dtype(DType dtype) { return row_format(dtype).has_value(); }

bool supports_weight(const Tensor& w) {
  return is_fp8(w.dtype) ? w.fp8_scales != nullptr : supports_weight_dtype(w.dtype);
}

void linear(const Tensor& x_in, const Tensor& w, const Tensor& bias, Tensor& y, ThreadPool& pool,
            bool quantize_activations) {
  const float* bias_data = check_linear(x_in, w, bias, y);
  if (w.int8_row_absmax != nullptr) {
    linear_llm_int8(x_in, w, bias_data, y, pool);
    return;
  }
  thread_local std::vector<float> ordered;
  const Tensor x = ordered_input(x_in, w, ordered);
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (w.layout == WeightLayout::kInterleaved8) {
    kernels::matmul_interleaved(checked_format(w), w.data, x.as<float>(), y.as<float>(), m, n, k,
                                pool, bias_data);
    return;
  }
  if (w.fp8_scales != nullptr) {
    kernels::matmul_fp8_panels(fp8_panels(w), x.as<float>(), y.as<float>(), m, n, k, pool,
                               bias_data);
    return;
  }
  if (w.layout == WeightLayout::kPanels16) {
    kernels::matmul_panels16(checked_format(w), w.data, x.as<float>(), y.as<float>(), m, n, k, pool,
                             bias_data);
    return;
  }
  if (w.layout == WeightLayout::kBf16Pairs) {
    kernels::matmul_bf16_pairs(w.data, x.as<float>(), y.as<float>(), m, n, k, pool, bias_data);
    return;
  }
  kernels::matmul(checked_format(w), w.data, w.row_bytes(), x.as<float>(), y.as<float>(), m, n, k,
                  pool, bias_data, kernels::best_isa(), quantize_activations);
}

void linear_shared_input(const Tensor& x, std::initializer_list<LinearOutput> outputs,
                         ThreadPool& pool, bool quantize_activations) {
  bool all_interleaved = true;
  for (const LinearOutput& o : outputs) {
    all_interleaved = all_interleaved && o.w->layout == WeightLayout::kInterleaved8 &&
                      o.w->column_order == nullptr && o.w->int8_row_absmax == nullptr;
  }
  if (!all_interleaved) {
    for (const LinearOutput& o : outputs) linear(x, *o.w, o.bias, *o.y, pool, quantize_activations);
    return;
  }
  std::vector<kernels::InterleavedProduct> products;
  products.reserve(outputs.size());
  for (const LinearOutput& o : outputs) {
    const float* bias_data = check_linear(x, *o.w, o.bias, *o.y);
    products.push_back({checked_format(*o.w), o.w->data, o.w->dim(0), o.y->as<float>(), bias_data});
  }
  thread_local kernels::InterleavedInput input;
  input.prepare(x.as<float>(), x.dim(0), x.dim(1), pool);
  kernels::matmul_interleaved(products, input, pool);
}

void embedding(const Tensor& table, const int32_t* ids, int64_t num_ids, Tensor& out) {
  LM_CHECK(table.layout == WeightLayout::kRows && table.column_order == nullptr &&
           table.int8_row_absmax == nullptr);
  LM_CHECK(table.rank() == 2 && out.rank() == 2 && out.dtype == DType::kF32);
  const int64_t rows = table.dim(0), k = table.dim(1);
  LM_CHECK(out.dim(0) == num_ids && out.dim(1) == k);
  const auto format = checked_format(table);
  const auto* base = static_cast<const uint8_t*>(table.data);
  for (int64_t i = 0; i < num_ids; ++i) {
    LM_CHECK_MSG(ids[i] >= 0 && ids[i] < rows, "token id outside the embedding table");
    kernels::dequantize_row(format, base + ids[i] * table.row_bytes(), out.as<float>() + i * k, k);
  }
}

std::vector<float> to_f32(const Tensor& t) {
  if (t.fp8_scales != nullptr) {  // as the kernels take its weights
    const kernels::Fp8Panels w = fp8_panels(t);
    const int64_t n = t.dim(0), k = t.dim(1);
    std::vector<float> out(static_cast<size_t>(n * k));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        out[static_cast<size_t>(j * k + p)] = kernels::fp8_panel_weight(
            w, k, j / kernels::kPanel16Rows, p, j % kernels::kPanel16Rows);
    return out;
  }
  LM_CHECK(t.layout == WeightLayout::kRows && t.int8_row_absmax == nullptr);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const int64_t k = t.shape.back();
  const int64_t rows = t.numel() / k;
  const auto format = checked_format(t);
  const auto* base = static_cast<const uint8_t*>(t.data);
  for (int64_t r = 0; r < rows; ++r)
    kernels::dequantize_row(format, base + r * t.row_bytes(), out.data() + r * k, k);
  return out;
}

}  // namespace lm::ops
