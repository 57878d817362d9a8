// One .safetensors file, memory-mapped. The JSON header is checked as hostile input: dtypes,
// shapes, offsets and duplicate names are validated against the file before any tensor is used.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "base/mapped_file.h"
#include "base/result.h"
#include "tensor/tensor.h"

namespace lm {

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);
  // A file's bytes, which the caller keeps alive (tests, fuzzing); `label` names them in errors
  // and stands for path(). Tensor views point into `bytes`.
  static Result<SafetensorsFile> parse(std::span<const uint8_t> bytes, const std::string& label);

  const std::string& path() const { return label_; }
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  // Whether [p, p + bytes) lies in this file's bytes, and MappedFile::drop_pages for it (a no-op
  // for a parsed buffer, which has no mapping).
  bool contains(const void* p, size_t bytes) const {
    const auto* first = static_cast<const uint8_t*>(p);
    return first >= bytes_.data() && bytes <= bytes_.size() &&
           static_cast<size_t>(first - bytes_.data()) <= bytes_.size() - bytes;
  }
  void drop_pages(const void* p, size_t bytes) const {
    if (file_.data() != nullptr) file_.drop_pages(p, bytes);
  }

 private:
  MappedFile file_;  // empty when parsed from caller-owned bytes
  std::string label_;
  std::span<const uint8_t> bytes_;  // file_'s mapping or the caller's bytes
  std::map<std::string, Tensor> tensors_;
};

}  // namespace lm
