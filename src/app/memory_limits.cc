#include "app/memory_limits.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace lm {
namespace {

namespace fs = std::filesystem;

// Limits at or above this are v1's "no limit" (PAGE_COUNTER_MAX, about 2^63 rounded to pages).
constexpr uint64_t kNoLimit = uint64_t{1} << 62;

std::optional<uint64_t> read_number(const fs::path& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    return std::stoull(word);
  } catch (...) {
    return std::nullopt;
  }
}

// A `key value` line of memory.stat (or `Key: value kB` of /proc/meminfo, times `scale`).
std::optional<uint64_t> read_key(const fs::path& file, const std::string& key, uint64_t scale) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    uint64_t value = 0;
    if (fields >> name >> value && (name == key || name == key + ":")) return value * scale;
  }
  return std::nullopt;
}

// The process's cgroup path for v2 ("0::/path") or for v1's memory controller.
std::optional<std::string> own_cgroup(const std::string& self_cgroup, int version) {
  std::ifstream in(self_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (version == 2 && line.substr(0, first) == "0" && controllers.empty()) return path;
    if (version == 1) {
      std::istringstream names(controllers);
      std::string name;
      while (std::getline(names, name, ',')) {
        if (name == "memory") return path;
      }
    }
  }
  return std::nullopt;
}

// The process's cgroup folder under `mount`, and its ancestors up to `mount`. Inside a container
// the path /proc/self/cgroup names is often the host's, not visible: then `mount` is our own.
std::vector<fs::path> cgroup_levels(const fs::path& mount, const std::optional<std::string>& own) {
  fs::path dir = mount;
  if (own && !own->empty() && *own != "/") {
    const fs::path candidate = mount / fs::path(*own).relative_path();
    std::error_code ec;
    if (fs::is_directory(candidate, ec)) dir = candidate;
  }
  std::vector<fs::path> levels;
  for (fs::path p = dir;; p = p.parent_path()) {
    levels.push_back(p);
    if (p == mount || !p.has_relative_path() || p.parent_path() == p) break;
  }
  return levels;
}

std::optional<CgroupMemory> tightest(const std::vector<fs::path>& levels, int version) {
  const char* limit_name = version == 2 ? "memory.max" : "memory.limit_in_bytes";
  const char* usage_name = version == 2 ? "memory.current" : "memory.usage_in_bytes";
  // Page cache the kernel drops before it would fail an allocation; v1 counts the subtree's
  // under total_*.
  const char* inactive_name = version == 2 ? "inactive_file" : "total_inactive_file";
  std::optional<CgroupMemory> best;
  for (const fs::path& level : levels) {
    const auto limit = read_number(level / limit_name);
    if (!limit || *limit >= kNoLimit) continue;
    CgroupMemory m;
    m.version = version;
    m.limit_file = (level / limit_name).string();
    m.limit = *limit;
    const uint64_t charged = read_number(level / usage_name).value_or(0);
    const uint64_t inactive = read_key(level / "memory.stat", inactive_name, 1).value_or(0);
    m.usage = charged > inactive ? charged - inactive : 0;
    m.headroom = m.limit > m.usage ? m.limit - m.usage : 0;
    if (!best || m.headroom < best->headroom) best = m;
  }
  return best;
}

std::string gib(uint64_t bytes) {
  std::ostringstream out;
  out.precision(2);
  out << std::fixed << static_cast<double>(bytes) / (1 << 30) << " GiB";
  return out.str();
}

}  // namespace

std::optional<CgroupMemory> read_cgroup_memory(const MemoryProbePaths& paths) {
  fs::path root = fs::path(paths.cgroup_root).lexically_normal();
  if (!root.has_filename()) root = root.parent_path();  // "/sys/fs/cgroup/" -> "/sys/fs/cgroup"
  std::error_code ec;
  if (fs::exists(root / "cgroup.controllers", ec)) {  // v2 mounted at the root (unified)
    return tightest(cgroup_levels(root, own_cgroup(paths.self_cgroup, 2)), 2);
  }
  if (fs::is_directory(root / "memory", ec)) {  // v1 (or hybrid): the memory hierarchy
    return tightest(cgroup_levels(root / "memory", own_cgroup(paths.self_cgroup, 1)), 1);
  }
  return std::nullopt;
}

AvailableMemory available_memory(const MemoryProbePaths& paths) {
  AvailableMemory out;
  out.mem_available = read_key(paths.meminfo, "MemAvailable", 1024);
  out.cgroup = read_cgroup_memory(paths);
  if (out.cgroup && (!out.mem_available || out.cgroup->headroom < *out.mem_available)) {
    out.bytes = out.cgroup->headroom;
    out.source = "cgroup v" + std::to_string(out.cgroup->version) + " limit " +
                 gib(out.cgroup->limit) + " (" + out.cgroup->limit_file + ") less " +
                 gib(out.cgroup->usage) + " in use";
  } else if (out.mem_available) {
    out.bytes = *out.mem_available;
    out.source = "MemAvailable";
    if (!out.cgroup) out.source += " (no cgroup memory limit)";
    if (out.cgroup)
      out.source += " (below the cgroup's headroom of " + gib(out.cgroup->headroom) + ")";
  } else {
    out.source = "unknown (no /proc/meminfo, no cgroup limit)";
  }
  return out;
}

}  // namespace lm
