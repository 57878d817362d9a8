// Writes a .safetensors file as a stream: the header first (it needs only names, dtypes and
// shapes), then each tensor's bytes in file order, so no tensor has to be in memory whole. The
// file appears under its name only when complete: bytes go to `<path>.tmp`, which finish()
// flushes, syncs and renames; a writer dropped before that removes the temporary.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace lm {

struct SafetensorsTensorSpec {
  std::string name;
  std::string dtype;  // safetensors name: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL
  std::vector<int64_t> shape;
};

// Where everything goes in the file. Tensors are laid out as the safetensors library does (wider
// dtypes first, then by name), so every tensor starts aligned to its element size and the file
// matches safetensors.torch.save_file byte for byte.
struct SafetensorsLayout {
  std::vector<SafetensorsTensorSpec> tensors;  // in file order
  std::string header;                          // the JSON header, padded to 8 bytes
  uint64_t data_bytes = 0;
};

// Checks names, dtypes and sizes; `label` names the file in errors.
Result<SafetensorsLayout> layout_safetensors(std::vector<SafetensorsTensorSpec> tensors,
                                             const std::map<std::string, std::string>& metadata,
                                             const std::string& label);

class SafetensorsWriter {
 public:
  // Creates `<path>.tmp` and writes the header.
  static Result<SafetensorsWriter> create(const std::string& path, SafetensorsLayout layout);

  SafetensorsWriter(SafetensorsWriter&& other) noexcept;
  SafetensorsWriter& operator=(SafetensorsWriter&&) = delete;
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  ~SafetensorsWriter();

  // The tensors in file order: append their bytes in exactly this order.
  const std::vector<SafetensorsTensorSpec>& tensors() const { return layout_.tensors; }

  // Appends the next bytes of tensor data (any split across calls).
  Status append(std::span<const uint8_t> bytes);
  // Checks every data byte arrived, then makes the file durable and visible under its name.
  Status finish();

 private:
  SafetensorsWriter() = default;
  Error fail(const std::string& what) const;
  // Closes and removes the temporary at once (the file is unusable after a failed write).
  Error abandon(const std::string& what);
  std::string removed_note() const;

  std::string path_;
  std::string tmp_path_;
  std::FILE* file_ = nullptr;
  SafetensorsLayout layout_;
  uint64_t written_ = 0;
};

}  // namespace lm
