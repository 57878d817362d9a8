// How much memory this process may still use: the smaller of MemAvailable (/proc/meminfo) and
// the headroom its cgroup's memory limit leaves (v2 memory.max, v1 memory.limit_in_bytes, on
// the process's own cgroup and every ancestor), so a container is sized inside its limit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace lm {

// Where to read; tests point these at a fake tree.
struct MemoryProbePaths {
  std::string meminfo = "/proc/meminfo";
  std::string self_cgroup = "/proc/self/cgroup";
  std::string cgroup_root = "/sys/fs/cgroup";
};

struct CgroupMemory {
  int version = 0;         // 1 or 2
  std::string limit_file;  // the file whose limit is tightest
  uint64_t limit = 0;      // bytes
  uint64_t usage = 0;      // bytes charged, less the inactive page cache it can reclaim
  uint64_t headroom = 0;   // limit - usage (0 when usage is over)
};

struct AvailableMemory {
  uint64_t bytes = 0;                     // min(MemAvailable, cgroup headroom)
  std::optional<uint64_t> mem_available;  // /proc/meminfo
  std::optional<CgroupMemory> cgroup;     // none: no limit set (or no cgroup memory controller)
  std::string source;                     // which one `bytes` is, for the log
};

// The tightest memory limit among the process's cgroup and its ancestors (none when every
// level says "max" / unlimited, or the files are missing).
std::optional<CgroupMemory> read_cgroup_memory(const MemoryProbePaths& paths);

AvailableMemory available_memory(const MemoryProbePaths& paths = {});

}  // namespace lm
