// MappedFile: a whole file mapped read-only, and drop_pages, which takes a range's pages out of
// resident memory without losing what they hold (the file brings them back).
#include "base/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace lm {
namespace {

std::string write_temp_file(const std::vector<uint8_t>& bytes) {
  std::string path = ::testing::TempDir() + "mapped_file_test_XXXXXX";
  const int fd = ::mkstemp(path.data());
  EXPECT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  return path;
}

TEST(MappedFile, DroppedPagesReadBackFromTheFile) {
  std::vector<uint8_t> bytes(5 * 4096 + 123);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  const std::string path = write_temp_file(bytes);
  auto file = MappedFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  ASSERT_EQ(file->size(), bytes.size());
  // Touch everything, drop a range that starts and ends mid-page, then read it all again.
  uint64_t sum = 0;
  for (uint8_t b : file->bytes()) sum += b;
  EXPECT_GT(sum, 0u);
  file->drop_pages(file->data() + 100, 4 * 4096);
  file->drop_pages(file->data(), file->size());
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), file->data()));
  std::remove(path.c_str());
}

TEST(MappedFileDeathTest, DropPagesRefusesMemoryOutsideTheMapping) {
  const std::string path = write_temp_file(std::vector<uint8_t>(8192, 1));
  auto file = MappedFile::open(path);
  ASSERT_TRUE(file.ok());
  std::vector<uint8_t> heap(8192);
  EXPECT_DEATH(file->drop_pages(heap.data(), heap.size()), "outside the mapping");
  EXPECT_DEATH(file->drop_pages(file->data() + 4096, 8192), "outside the mapping");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace lm
