// The free-space check made before a download starts: the bytes still to fetch (sizes from the
// Hub's model info, less what partial files already hold), doubled when the weights are PyTorch
// .bin files that will be converted to safetensors next to them.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"

namespace lm::hub {

uint64_t bytes_needed(uint64_t bytes_to_download, bool needs_conversion);

// Free bytes for an unprivileged writer (statvfs f_bavail * f_frsize) on the file system of
// `path`, or of its nearest existing parent when it does not exist yet.
Result<uint64_t> free_disk_bytes(const std::string& path);

// Refuses with a message stating needed vs free.
Status check_disk_space(uint64_t needed, uint64_t free, const std::string& dir);

// "1.50 GB", "12.0 MB", "512 B" (decimal units, as the Hub shows sizes).
std::string format_bytes(uint64_t bytes);

}  // namespace lm::hub
