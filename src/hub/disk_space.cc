#include "hub/disk_space.h"

#include <fmt/format.h>
#include <sys/statvfs.h>

#include <filesystem>

namespace lm::hub {

uint64_t bytes_needed(uint64_t bytes_to_download, bool needs_conversion) {
  return needs_conversion ? bytes_to_download * 2 : bytes_to_download;
}

Result<uint64_t> free_disk_bytes(const std::string& path) {
  std::filesystem::path p = std::filesystem::absolute(path);
  std::error_code ec;
  while (!std::filesystem::exists(p, ec) && p.has_parent_path() && p != p.parent_path())
    p = p.parent_path();
  struct statvfs st {};
  if (::statvfs(p.c_str(), &st) != 0) return Error{"cannot read the free space of " + p.string()};
  return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
}

Status check_disk_space(uint64_t needed, uint64_t free, const std::string& dir) {
  if (needed <= free) return {};
  return Error{fmt::format(
      "Not enough free disk space to download the model into {}: it needs {} ({} bytes) but only "
      "{} ({} bytes) are free. Free some space or point --huggingface-hub-cache "
      "(HUGGINGFACE_HUB_CACHE) at a larger volume.",
      dir, format_bytes(needed), needed, format_bytes(free), free)};
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
  if (bytes < 1000) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1000 && unit < 5) {
    value /= 1000;
    ++unit;
  }
  if (value < 10) return fmt::format("{:.2f} {}", value, kUnits[unit]);
  if (value < 100) return fmt::format("{:.1f} {}", value, kUnits[unit]);
  return fmt::format("{:.0f} {}", value, kUnits[unit]);
}

}  // namespace lm::hub
