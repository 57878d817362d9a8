// Helpers shared by the fuzz targets: an input split into NUL-separated parts (JSON, templates
// and texts never hold a raw NUL, so the parts stay independent under mutation), and a sink the
// optimizer cannot drop, so a target's reads of parsed data really happen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace lm::fuzz {

// The first `max_parts` - 1 NUL-separated parts; the last part holds the rest (NULs included).
inline std::vector<std::string_view> split_parts(const uint8_t* data, size_t size,
                                                 size_t max_parts) {
  std::vector<std::string_view> parts;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (parts.size() + 1 < max_parts) {
    const size_t nul = rest.find('\0');
    if (nul == std::string_view::npos) break;
    parts.push_back(rest.substr(0, nul));
    rest.remove_prefix(nul + 1);
  }
  parts.push_back(rest);
  return parts;
}

// Reads `bytes` so that ASan checks every one of them and the compiler cannot elide the reads.
inline void touch(const void* p, size_t bytes) {
  const auto* b = static_cast<const volatile uint8_t*>(p);
  uint8_t acc = 0;
  for (size_t i = 0; i < bytes; ++i) acc = static_cast<uint8_t>(acc + b[i]);
  [[maybe_unused]] volatile uint8_t sink = acc;
}

}  // namespace lm::fuzz
