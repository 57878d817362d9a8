// A read-only ZIP reader for the archives torch.save writes: stored (uncompressed) entries, often
// with ZIP64 records. Only the central directory is trusted for sizes (torch sets the data
// descriptor flag, so local headers carry zero sizes); every offset, length and name is checked
// against the file before an entry's bytes are exposed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "base/mapped_file.h"
#include "base/result.h"

namespace lm {

class ZipArchive {
 public:
  // Maps `path` and indexes it; the archive owns the mapping.
  static Result<ZipArchive> open(const std::string& path);
  // Indexes bytes the caller keeps alive; `label` names them in error messages.
  static Result<ZipArchive> parse(std::span<const uint8_t> bytes, const std::string& label);

  // The bytes of entry `name`, or nullopt when the archive has no such entry.
  std::optional<std::span<const uint8_t>> find(const std::string& name) const;
  // Every entry, by name. Spans point into the mapping, which does not move with the archive.
  const std::map<std::string, std::span<const uint8_t>>& entries() const { return entries_; }
  const std::string& label() const { return label_; }

 private:
  MappedFile file_;  // empty when parsed from caller-owned bytes
  std::string label_;
  std::map<std::string, std::span<const uint8_t>> entries_;
};

// True when `bytes` start with a ZIP local file header signature ("PK\3\4").
bool has_zip_signature(std::span<const uint8_t> bytes);

}  // namespace lm
