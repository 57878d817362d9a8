// The memory the launcher sizes the KV cache from, read from fake /proc and cgroup trees:
// cgroup v2 and v1, "max" / unlimited, a limit on an ancestor, reclaimable page cache, missing
// files, and MemAvailable when it is the smaller.
#include "app/memory_limits.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace lm {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = 1 << 20;

class MemoryLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_ / "proc");
    paths_.meminfo = (root_ / "proc/meminfo").string();
    paths_.self_cgroup = (root_ / "proc/cgroup").string();
    paths_.cgroup_root = (root_ / "cgroup").string();
    fs::create_directories(paths_.cgroup_root);
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  void meminfo(uint64_t available_kib) {
    write(paths_.meminfo, "MemTotal:       99999999 kB\nMemFree:  1 kB\nMemAvailable:   " +
                              std::to_string(available_kib) + " kB\n");
  }

  fs::path root_;
  MemoryProbePaths paths_;
};

TEST_F(MemoryLimits, CgroupV2LimitLessUsageAndReclaimableCache) {
  meminfo(8 * 1024 * 1024);  // 8 GiB
  const fs::path cg = fs::path(paths_.cgroup_root);
  write(cg / "cgroup.controllers", "cpu memory\n");
  write(paths_.self_cgroup, "0::/kubepods/pod1/c1\n");
  write(cg / "kubepods/pod1/c1/memory.max", std::to_string(2048 * kMiB) + "\n");
  write(cg / "kubepods/pod1/c1/memory.current", std::to_string(700 * kMiB) + "\n");
  write(cg / "kubepods/pod1/c1/memory.stat",
        "anon 1\nfile 2\ninactive_file " + std::to_string(200 * kMiB) + "\nactive_file 3\n");
  const AvailableMemory m = available_memory(paths_);
  ASSERT_TRUE(m.cgroup.has_value());
  EXPECT_EQ(m.cgroup->version, 2);
  EXPECT_EQ(m.cgroup->limit, 2048 * kMiB);
  EXPECT_EQ(m.cgroup->usage, 500 * kMiB);  // 700 charged, 200 of it page cache it can drop
  EXPECT_EQ(m.bytes, 1548 * kMiB);
  EXPECT_NE(m.source.find("cgroup v2"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("kubepods/pod1/c1/memory.max"), std::string::npos) << m.source;
}

TEST_F(MemoryLimits, CgroupV2MaxEverywhereFallsBackToMemAvailable) {
  meminfo(4 * 1024 * 1024);
  const fs::path cg = fs::path(paths_.cgroup_root);
  write(cg / "cgroup.controllers", "memory\n");
  write(paths_.self_cgroup, "0::/a\n");
  write(cg / "a/memory.max", "max\n");
  write(cg / "a/memory.current", "12345\n");
  const AvailableMemory m = available_memory(paths_);
  EXPECT_FALSE(m.cgroup.has_value());
  EXPECT_EQ(m.bytes, 4096 * kMiB);
  EXPECT_EQ(m.source, "MemAvailable (no cgroup memory limit)");
}

TEST_F(MemoryLimits, TheTightestAncestorWins) {
  meminfo(64 * 1024 * 1024);
  const fs::path cg = fs::path(paths_.cgroup_root);
  write(cg / "cgroup.controllers", "memory\n");
  write(paths_.self_cgroup, "0::/parent/child\n");
  write(cg / "parent/memory.max", std::to_string(1024 * kMiB));
  write(cg / "parent/memory.current", std::to_string(900 * kMiB));
  write(cg / "parent/child/memory.max", "max");
  write(cg / "parent/child/memory.current", std::to_string(100 * kMiB));
  const AvailableMemory m = available_memory(paths_);
  ASSERT_TRUE(m.cgroup.has_value());
  EXPECT_EQ(m.bytes, 124 * kMiB);
  EXPECT_EQ(m.cgroup->limit_file, (cg / "parent/memory.max").string());
}

TEST_F(MemoryLimits, CgroupV1MemoryController) {
  meminfo(16 * 1024 * 1024);
  const fs::path mem = fs::path(paths_.cgroup_root) / "memory";
  write(paths_.self_cgroup, "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n");
  write(mem / "memory.limit_in_bytes", "9223372036854771712\n");  // the root: unlimited
  write(mem / "docker/abc/memory.limit_in_bytes", std::to_string(3072 * kMiB));
  write(mem / "docker/abc/memory.usage_in_bytes", std::to_string(1024 * kMiB));
  write(mem / "docker/abc/memory.stat",
        "cache 5\ninactive_file 7\ntotal_inactive_file " + std::to_string(24 * kMiB) + "\n");
  const AvailableMemory m = available_memory(paths_);
  ASSERT_TRUE(m.cgroup.has_value());
  EXPECT_EQ(m.cgroup->version, 1);
  EXPECT_EQ(m.cgroup->usage, 1000 * kMiB);
  EXPECT_EQ(m.bytes, 2072 * kMiB);
  EXPECT_NE(m.source.find("cgroup v1"), std::string::npos);
}

// Inside a container /proc/self/cgroup names the host's path, which is not mounted there: the
// mount's own files are the container's.
TEST_F(MemoryLimits, CgroupV1PathNotVisibleUsesTheMountRoot) {
  meminfo(16 * 1024 * 1024);
  const fs::path mem = fs::path(paths_.cgroup_root) / "memory";
  write(paths_.self_cgroup, "9:memory:/kubepods/burstable/pod9/xyz\n");
  write(mem / "memory.limit_in_bytes", std::to_string(512 * kMiB));
  write(mem / "memory.usage_in_bytes", std::to_string(12 * kMiB));
  const AvailableMemory m = available_memory(paths_);
  ASSERT_TRUE(m.cgroup.has_value());
  EXPECT_EQ(m.bytes, 500 * kMiB);
}

TEST_F(MemoryLimits, MemAvailableWhenSmallerThanTheHeadroom) {
  meminfo(256 * 1024);  // 256 MiB
  const fs::path cg = fs::path(paths_.cgroup_root);
  write(cg / "cgroup.controllers", "memory\n");
  write(paths_.self_cgroup, "0::/\n");
  write(cg / "memory.max", std::to_string(4096 * kMiB));
  write(cg / "memory.current", "0");
  const AvailableMemory m = available_memory(paths_);
  ASSERT_TRUE(m.cgroup.has_value());
  EXPECT_EQ(m.bytes, 256 * kMiB);
  EXPECT_NE(m.source.find("MemAvailable"), std::string::npos);
}

TEST_F(MemoryLimits, UsageOverTheLimitLeavesNothing) {
  meminfo(1024 * 1024);
  const fs::path cg = fs::path(paths_.cgroup_root);
  write(cg / "cgroup.controllers", "memory\n");
  write(paths_.self_cgroup, "0::/\n");
  write(cg / "memory.max", std::to_string(100 * kMiB));
  write(cg / "memory.current", std::to_string(150 * kMiB));
  EXPECT_EQ(available_memory(paths_).bytes, 0u);
}

TEST_F(MemoryLimits, MissingFilesMeanNoLimitAndUnknownMemory) {
  fs::remove_all(paths_.cgroup_root);
  const AvailableMemory m = available_memory(paths_);
  EXPECT_FALSE(m.cgroup.has_value());
  EXPECT_FALSE(m.mem_available.has_value());
  EXPECT_EQ(m.bytes, 0u);
  EXPECT_NE(m.source.find("unknown"), std::string::npos);
}

// This machine: whatever it has, the answer is one of the two sources and not above MemAvailable.
TEST(MemoryLimitsHere, NeverAboveMemAvailable) {
  const AvailableMemory m = available_memory();
  ASSERT_TRUE(m.mem_available.has_value());
  EXPECT_LE(m.bytes, *m.mem_available);
  EXPECT_GT(m.bytes, 0u);
}

}  // namespace
}  // namespace lm
