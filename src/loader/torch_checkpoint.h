// A PyTorch checkpoint (torch.save zip format, torch >= 1.6) read as a flat list of tensor views
// into its storages. The pickle is read by the restricted unpickler; every tensor's shape, strides
// and offset are checked against the bytes of its storage entry before the view is handed out.
// The legacy (pre-1.6) format and big-endian archives are refused.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "base/result.h"
#include "loader/restricted_unpickler.h"
#include "loader/zip_archive.h"

namespace lm {

// Element types of torch storages that safetensors can also name.
enum class TorchDType : uint8_t { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

struct TorchDTypeInfo {
  TorchDType dtype;
  std::string_view storage_class;     // the legacy typed storage torch.save names, in module torch
  std::string_view safetensors_name;  // "F32", "BF16", "BOOL", ...
  int64_t element_bytes;
};

const TorchDTypeInfo& torch_dtype_info(TorchDType dtype);

// One entry of the state dict: a strided view of a storage. Several tensors may view one storage.
struct TorchTensor {
  std::string name;
  TorchDType dtype = TorchDType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;      // in elements
  int64_t storage_offset = 0;        // in elements
  std::string storage_key;           // the entry <archive>/data/<storage_key>
  std::span<const uint8_t> storage;  // all bytes of that storage (checked to cover the view)

  int64_t num_elements() const;
  uint64_t num_bytes() const;  // of a contiguous copy
  bool is_contiguous() const;
  // The view's first element (valid to read num_elements() elements along the strides).
  const uint8_t* first_element() const;
};

class TorchCheckpoint {
 public:
  static Result<TorchCheckpoint> open(const std::string& path);
  // A checkpoint's bytes, which the caller keeps alive (tests, fuzzing); `label` names them in
  // errors and stands for path(). Tensor views point into `bytes`.
  static Result<TorchCheckpoint> parse(std::span<const uint8_t> bytes, const std::string& label);

  const std::string& path() const { return label_; }
  uint64_t file_size() const { return file_size_; }
  // In the state dict's order.
  const std::vector<TorchTensor>& tensors() const { return tensors_; }

 private:
  MappedFile file_;  // empty when parsed from caller-owned bytes
  std::string label_;
  uint64_t file_size_ = 0;
  ZipArchive archive_;  // views file_'s mapping or the caller's bytes
  std::vector<TorchTensor> tensors_;
};

// The names a torch.save'd state dict may reference: OrderedDict, the tensor and parameter
// rebuild functions, and the typed storage classes of TorchDType.
const UnpicklePolicy& torch_state_dict_policy();

}  // namespace lm
