// A GGUF v2/v3 file, memory-mapped and validated as hostile input: the header, every metadata
// value and every tensor info is checked against the file before use, so a malformed file
// yields one Error naming the file and the problem. Tensor data stays in the mapping. The first
// shard of a split model (llama.cpp's gguf-split) opens as one file with every shard's tensors
// (gguf_split.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "base/mapped_file.h"
#include "base/result.h"
#include "tensor/tensor.h"

namespace lm {

// One metadata value. Integers keep their signedness; arrays hold values of one element type.
struct GgufValue {
  enum class Type : uint32_t {
    kU8 = 0,
    kI8 = 1,
    kU16 = 2,
    kI16 = 3,
    kU32 = 4,
    kI32 = 5,
    kF32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kU64 = 10,
    kI64 = 11,
    kF64 = 12,
  };
  Type type = Type::kU8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<GgufValue>> value;

  bool is_integer() const;
  bool is_number() const { return is_integer() || type == Type::kF32 || type == Type::kF64; }
};

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;          // outermost first (GGUF stores innermost first; we reverse)
  uint64_t offset = 0;  // absolute offset in the file that holds the data
  uint64_t num_bytes = 0;
  uint32_t shard_idx = 0;  // that file: 0 the opened one, i its split's (i+1)-th shard
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path);
  // One file's bytes, which the caller keeps alive (tests, fuzzing); `label` names them in errors
  // and stands for path(). Tensor views point into `bytes`. Split models are not joined.
  static Result<GgufFile> parse(std::span<const uint8_t> bytes, const std::string& label);

  const std::string& path() const { return label_; }
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensor_infos() const { return tensors_; }
  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // A view of a tensor's bytes inside the mapping.
  Tensor tensor(const GgufTensorInfo& info) const;
  // MappedFile::drop_pages for bytes of this file's mappings (e.g. a tensor copied elsewhere); a
  // no-op for a parsed buffer, which has no mapping.
  void drop_pages(const void* p, size_t bytes) const;

  // Typed metadata accessors: nullopt when absent, Error when present with the wrong type.
  Result<std::optional<std::string>> get_string(const std::string& key) const;
  Result<std::optional<int64_t>> get_int(const std::string& key) const;
  Result<std::optional<double>> get_float(const std::string& key) const;
  Result<std::optional<bool>> get_bool(const std::string& key) const;
  Result<std::vector<std::string>> get_string_array(const std::string& key) const;
  Result<std::vector<double>> get_number_array(const std::string& key) const;

 private:
  friend Result<GgufFile> join_gguf_split(GgufFile first);
  static Result<GgufFile> open_one(const std::string& path);
  Error error(const std::string& what) const { return Error{path() + ": " + what}; }

  MappedFile file_;                      // empty when parsed from caller-owned bytes
  std::string label_;                    // the path, or parse()'s label
  std::span<const uint8_t> bytes_;       // the first file's bytes: file_'s mapping or the caller's
  std::vector<MappedFile> shard_files_;  // a split model's other shards, in order
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_idx_;
};

}  // namespace lm
