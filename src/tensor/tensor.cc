#include "tensor/tensor.h"

#include <numeric>

namespace lm {

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t num_elements(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

int64_t Tensor::row_bytes() const {
  LM_CHECK(rank() >= 1);
  auto bytes = dtype_bytes(dtype, static_cast<uint64_t>(shape.back()));
  LM_CHECK(bytes.has_value());
  return static_cast<int64_t>(*bytes);
}

Buffer::Buffer(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {
  auto bytes = dtype_bytes(dtype, static_cast<uint64_t>(num_elements(shape_)));
  LM_CHECK(bytes.has_value());
  storage_.lines.resize((*bytes + 63) / 64);
}

}  // namespace lm
