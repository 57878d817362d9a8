// safetensors as hostile input: the 8-byte length and JSON header of one file
// (SafetensorsFile::parse on the input bytes), with every tensor's bytes read in full (ASan checks
// they lie inside the input); and the same bytes as a sharded checkpoint's index JSON, read by
// the loader (parse_safetensors_index) and by the hub's download planner (index_shard_files).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "hub/file_selection.h"
#include "loader/safetensors_file.h"
#include "loader/safetensors_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = lm::SafetensorsFile::parse(std::span<const uint8_t>(data, size), "fuzz.safetensors");
  if (file.ok()) {
    for (const auto& entry : file->tensors()) {
      const lm::Tensor& tensor = entry.second;
      // safetensors dtypes are unquantized: one element per block.
      const int64_t bytes = tensor.numel() * lm::dtype_info(tensor.dtype).block_bytes;
      lm::fuzz::touch(tensor.data, static_cast<size_t>(bytes));
    }
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto index = lm::parse_safetensors_index(text, "model.safetensors.index.json");
  if (index.ok()) {
    for (const auto& entry : index->weight_map) {
      if (entry.second.empty() || entry.second.find('/') != std::string::npos) __builtin_trap();
    }
  }
  (void)lm::hub::index_shard_files(text, "model.safetensors.index.json");
  return 0;
}
