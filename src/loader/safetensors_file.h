// One .safetensors file, memory-mapped. The JSON header is checked as hostile input: dtypes,
// shapes, offsets and duplicate names are validated against the file before any tensor is used.
#pragma once

#include <map>
#include <string>

#include "base/mapped_file.h"
#include "base/result.h"
#include "tensor/tensor.h"

namespace lm {

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  // Whether [p, p + bytes) lies in this file's mapping, and MappedFile::drop_pages for it.
  bool contains(const void* p, size_t bytes) const {
    const auto* first = static_cast<const uint8_t*>(p);
    return first >= file_.data() && bytes <= file_.size() &&
           static_cast<size_t>(first - file_.data()) <= file_.size() - bytes;
  }
  void drop_pages(const void* p, size_t bytes) const { file_.drop_pages(p, bytes); }

 private:
  MappedFile file_;
  std::map<std::string, Tensor> tensors_;
};

}  // namespace lm
