// Operators that read weight rows in their stored format: linear layers and embedding lookup.
// They check shapes and dtypes, then switch on the device (CPU only for now).
#pragma once

#include "base/result.h"
#include "base/thread_pool.h"
#include "kernels/cpu/row_format.h"
#include "tensor/tensor.h"

#include <initializer_list>
#include <optional>
#include <vector>

namespace lm::ops {

// The CPU kernels' row format of a weight dtype, or nullopt for a dtype they do not read.
std::optional<kernels::RowFormat> row_format(DType dtype);

// True when the kernels can compute with weights of this dtype.
bool supports_weight_dtype(DType dtype);

// True when the kernels can compute with this weight: a supported dtype, or FP8 with its scales
// (Tensor::fp8_scales).
bool supports_weight(const Tensor& w);

// y[m, n] = x[m, k] . w[n, k]^T + bias[n]; x, y fp32; w in any supported dtype; bias fp32 or empty.
// A weight with a column_order (tensor.h) reads x's columns in that order. An LLM.int8 weight
// (int8_row_absmax, tensor.h) takes x as LLM.int8 quantizes it, whatever quantize_activations says.
// quantize_activations: for GGML block-format weights, x is quantized to int8 blocks and the dots
// are integer (llama.cpp's numerics); ignored for other dtypes. Interleaved weights
// (ops/cpu_weights.h) always take the int8 path, F16/BF16 panels the panel GEMM, FP8 weights
// (in panels: ops::pack_fp8_weight) the FP8 panel kernels with fp32 activations.
void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, ThreadPool& pool,
            bool quantize_activations = false);

// One of several Linears that read the same input.
struct LinearOutput {
  const Tensor* w;
  Tensor bias;  // fp32 [n] or empty
  Tensor* y;
};

// linear(x, o.w, o.bias, *o.y, ...) for every output; when all the weights are interleaved, x is
// quantized and prepared for them once.
void linear_shared_input(const Tensor& x, std::initializer_list<LinearOutput> outputs,
                         ThreadPool& pool, bool quantize_activations = false);

// out[i, :] = table[ids[i], :] as fp32; ids must be valid rows (checked).
void embedding(const Tensor& table, const int32_t* ids, int64_t num_ids, Tensor& out);

// A weight's rows as fp32 (for norms and biases stored in F16/BF16), columns as stored (a
// column_order is not undone).
std::vector<float> to_f32(const Tensor& t);

}  // namespace lm::ops
