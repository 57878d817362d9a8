#include "tensor/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

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
constexpr size_t kHugePage = size_t{2} << 20;

void* map_anonymous(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  LM_CHECK_MSG(p != MAP_FAILED, "out of memory mapping a buffer");
  return p;
}

// `bytes` of anonymous memory starting on a 2 MiB boundary and marked for huge pages before any
// page is touched (a huge page is only used for a whole aligned 2 MiB of the mapping). The
// slack mapped to find the boundary is unmapped again.
void* map_huge(size_t bytes) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t kept = (bytes + page - 1) / page * page;  // what munmap(p, bytes) releases
  auto* raw = static_cast<uint8_t*>(map_anonymous(kept + kHugePage));
  const auto address = reinterpret_cast<uintptr_t>(raw);
  auto* aligned = reinterpret_cast<uint8_t*>((address + kHugePage - 1) / kHugePage * kHugePage);
  const auto head = static_cast<size_t>(aligned - raw);
  if (head > 0) ::munmap(raw, head);
  ::munmap(aligned + kept, kHugePage - head);
  ::madvise(aligned, kept, MADV_HUGEPAGE);  // advice only: without THP the pages stay small
  return aligned;
}
}  // namespace

Buffer::Buffer(Shape shape, DType dtype, Pages pages) : shape_(std::move(shape)), dtype_(dtype) {
  auto bytes = dtype_bytes(dtype, static_cast<uint64_t>(num_elements(shape_)));
  LM_CHECK(bytes.has_value());
  bytes_ = std::max<size_t>((*bytes + 63) / 64 * 64, 64);
  if (bytes_ >= kMapThreshold) {
    data_ = pages == Pages::kHuge && bytes_ >= kHugePage ? map_huge(bytes_) : map_anonymous(bytes_);
    mapped_ = true;
  } else {
    data_ = std::aligned_alloc(64, bytes_);
    LM_CHECK_MSG(data_ != nullptr, "out of memory allocating a buffer");
    std::memset(data_, 0, bytes_);
  }
}

Buffer Buffer::of_bytes(int64_t bytes, Pages pages) {
  LM_CHECK(bytes >= 0);
  return Buffer({(bytes + 3) / 4}, DType::kI32, pages);
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
