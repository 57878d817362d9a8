#include "hub/disk_space.h"

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace lm::hub {
namespace {

TEST(DiskSpace, ConversionDoublesTheNeed) {
  EXPECT_EQ(bytes_needed(13'500'000'000ull, false), 13'500'000'000ull);
  EXPECT_EQ(bytes_needed(13'500'000'000ull, true), 27'000'000'000ull);
}

TEST(DiskSpace, RefusesWithNeededAndFree) {
  EXPECT_TRUE(check_disk_space(100, 100, "/data").ok());
  Status s = check_disk_space(2'000'000'000ull, 1'500'000'000ull, "/data/hub");
  ASSERT_FALSE(s.ok());
  const std::string& m = s.error().message;
  EXPECT_NE(m.find("/data/hub"), std::string::npos) << m;
  EXPECT_NE(m.find("needs 2.00 GB (2000000000 bytes)"), std::string::npos) << m;
  EXPECT_NE(m.find("only 1.50 GB (1500000000 bytes) are free"), std::string::npos) << m;
}

TEST(DiskSpace, FormatsBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1500), "1.50 kB");
  EXPECT_EQ(format_bytes(13'476'839'424ull), "13.5 GB");
  EXPECT_EQ(format_bytes(1'000'000'000'000'000ull), "1.00 PB");
}

TEST(DiskSpace, FreeBytesOfAFolderNotMadeYet) {
  testing::TempDir dir;
  auto free = free_disk_bytes(dir.path() + "/hub/models--a--b");
  ASSERT_TRUE(free.ok()) << free.error().message;
  EXPECT_GT(*free, 0u);
}

}  // namespace
}  // namespace lm::hub
