#include "tensor/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <utility>

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

namespace {
constexpr size_t kMapThreshold = size_t{1} << 20;
}  // namespace

Buffer::Buffer(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {
  auto bytes = dtype_bytes(dtype, static_cast<uint64_t>(num_elements(shape_)));
  LM_CHECK(bytes.has_value());
  bytes_ = std::max<size_t>((*bytes + 63) / 64 * 64, 64);
  if (bytes_ >= kMapThreshold) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    LM_CHECK_MSG(p != MAP_FAILED, "out of memory mapping a buffer");
    data_ = p;
    mapped_ = true;
  } else {
    data_ = std::aligned_alloc(64, bytes_);
    LM_CHECK_MSG(data_ != nullptr, "out of memory allocating a buffer");
    std::memset(data_, 0, bytes_);
  }
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      mapped_(other.mapped_),
      shape_(std::move(other.shape_)),
      dtype_(other.dtype_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    mapped_ = other.mapped_;
    shape_ = std::move(other.shape_);
    dtype_ = other.dtype_;
  }
  return *this;
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (data_ == nullptr) return;
  if (mapped_) {
    ::munmap(data_, bytes_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
}

}  // namespace lm
