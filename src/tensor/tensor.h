// Tensor: a non-owning view (dtype, shape, data pointer, device). Shapes are row-major and
// outermost first, as in PyTorch: a Linear weight is [out_features, in_features]. Memory is
// owned elsewhere (a MappedFile for weights, a Buffer for activations).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "base/check.h"
#include "tensor/device.h"
#include "tensor/dtype.h"

namespace lm {

using Shape = std::vector<int64_t>;

std::string shape_string(const Shape& shape);
int64_t num_elements(const Shape& shape);

// How a 2-D weight's rows are stored: one after another, interleaved 8 at a time for the CPU's
// int8 GEMM (kernels/cpu/interleaved_rows.h), F16/BF16 rows in k-major panels of 16
// (kernels/cpu/panels16.h), or BF16 rows in panels of 16 k-major in pairs of k for the bf16 pair
// dot (kernels/cpu/bf16_pairs.h); only the ops::linear functions read the last three.
enum class WeightLayout : uint8_t { kRows, kInterleaved8, kPanels16, kBf16Pairs };

// The scales of an FP8 weight (an FP8 checkpoint's Linear, loader/fp8_linear.h, or one quantized
// by --quantize fp8): weight (j, p) is its FP8 value times its scale in fp32. In rows (as loaded)
// the scales are `grid`, [ceil(rows / block_rows), grid_cols], each covering block_rows x
// block_cols (cut at the edges); in panels (layout kPanels16, as the CPU runs it:
// ops::pack_fp8_weight) `lanes` also holds them spread over each panel's rows
// (kernels/cpu/panels_fp8.h).
struct Fp8Scales {
  std::vector<float> grid;
  int64_t block_rows = 1, block_cols = 1, grid_cols = 1;
  std::vector<float> lanes;
};

struct Tensor {
  DType dtype = DType::kF32;
  Shape shape;
  void* data = nullptr;
  Device device = Device::kCpu;
  WeightLayout layout = WeightLayout::kRows;
  // A Linear weight whose columns are a permutation of the input's: column j multiplies input
  // column column_order[j] (act-order GPTQ weights, regrouped at load so each group's columns are
  // adjacent: loader/integer_linear.h). Null: column j multiplies input column j.
  const int32_t* column_order = nullptr;
  // An LLM.int8 weight (TGI's --quantize bitsandbytes; kernels/cpu/llm_int8.h): Q8_0 rows whose
  // block scales are 1 (the int8 values themselves) and row j's absmax here; the Linear quantizes
  // its input as LLM.int8 does and scales output j by absmax[j] / 127. Null for every other weight.
  const float* int8_row_absmax = nullptr;
  // An FP8 weight's scales (dtype F8_E4M3 or F8_E5M2; Fp8Scales above). Null otherwise.
  const Fp8Scales* fp8_scales = nullptr;

  bool empty() const { return data == nullptr; }
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t dim(int i) const {
    LM_CHECK(i >= 0 && i < rank());
    return shape[static_cast<size_t>(i)];
  }
  int64_t numel() const { return num_elements(shape); }
  // Bytes of one row (the innermost dimension), respecting quantization blocks.
  int64_t row_bytes() const;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// An owned, zero-initialized, 64-byte aligned host buffer for activations, workspaces and the KV
// pool. Large buffers come from anonymous mmap, so untouched pages (e.g. free KV blocks) cost no
// RAM until first written.
class Buffer {
 public:
  // kHuge asks for 2 MiB pages (transparent huge pages, where the kernel allows them) for a
  // large buffer that is read through every step, as repacked weights are: the hardware
  // prefetcher does not cross 4 KiB pages, and fewer TLB entries cover the stream.
  enum class Pages { kSmall, kHuge };

  Buffer() = default;
  explicit Buffer(Shape shape, DType dtype = DType::kF32, Pages pages = Pages::kSmall);
  // `bytes` of raw storage (its view() is an I32 tensor covering them).
  static Buffer of_bytes(int64_t bytes, Pages pages = Pages::kSmall);
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  Tensor view() const { return {dtype_, shape_, data_, Device::kCpu}; }
  float* f32() { return static_cast<float*>(data_); }
  const float* f32() const { return static_cast<const float*>(data_); }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return num_elements(shape_); }

 private:
  void release();

  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool mapped_ = false;
  Shape shape_;
  DType dtype_ = DType::kF32;
};

}  // namespace lm
