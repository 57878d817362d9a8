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

 private:
  MappedFile file_;
  std::map<std::string, Tensor> tensors_;
};

}  // namespace lm
