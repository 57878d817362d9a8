// FileLock: an exclusive flock() that a second holder waits for (told through on_wait), and
// write_text_file_atomically: the whole new file or the old one, never a temporary left behind.
#include "base/file_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "base/text_file.h"

namespace lm {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(FileLock, ASecondHolderWaitsUntilTheFirstReleases) {
  const std::string path = (fresh_dir("file_lock_test") / "sub" / "x.lock").string();
  auto first = FileLock::acquire(path, /*create=*/true);
  ASSERT_TRUE(first.ok()) << first.error().message;
  std::atomic<bool> waited{false};
  std::atomic<bool> acquired{false};
  std::thread second([&] {
    // Its own open file description: flock() conflicts with the first even in one process.
    auto lock = FileLock::acquire(path, /*create=*/false, [&] { waited = true; });
    ASSERT_TRUE(lock.ok()) << lock.error().message;
    acquired = true;
  });
  while (!waited) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(acquired);
  { FileLock released = std::move(*first); }
  second.join();
  EXPECT_TRUE(acquired);
  // Free again: no wait.
  bool waited_again = false;
  auto again = FileLock::acquire(path, /*create=*/false, [&] { waited_again = true; });
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(waited_again);
}

TEST(FileLock, AMissingFileIsAnErrorUnlessCreated) {
  const std::string path = (fresh_dir("file_lock_missing") / "none.bin").string();
  auto lock = FileLock::acquire(path, /*create=*/false);
  ASSERT_FALSE(lock.ok());
  EXPECT_NE(lock.error().message.find("none.bin"), std::string::npos) << lock.error().message;
}

TEST(WriteTextFileAtomically, ReplacesTheFileAndLeavesNoTemporary) {
  const fs::path dir = fresh_dir("atomic_write");
  const std::string path = (dir / "index.json").string();
  ASSERT_TRUE(write_text_file_atomically(path, "old").ok());
  ASSERT_TRUE(write_text_file_atomically(path, "new text").ok());
  EXPECT_EQ(*read_text_file(path), "new text");
  ASSERT_TRUE(write_text_file_atomically(path, "", (dir / ".elsewhere.tmp").string()).ok());
  EXPECT_EQ(*read_text_file(path), "");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST(WriteTextFileAtomically, AFailureKeepsTheOldFileAndNamesTheNewOne) {
  const fs::path dir = fresh_dir("atomic_write_fail");
  const std::string path = (dir / "ref").string();
  ASSERT_TRUE(write_text_file_atomically(path, "old").ok());
  // The rename cannot replace a folder: the old content stays, the temporary goes.
  const std::string blocked = (dir / "blocked").string();
  fs::create_directories(fs::path(blocked) / "child");
  auto s = write_text_file_atomically(blocked, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cannot write " + blocked), std::string::npos)
      << s.error().message;
  EXPECT_FALSE(fs::exists(blocked + ".tmp"));
  EXPECT_EQ(*read_text_file(path), "old");
}

}  // namespace
}  // namespace lm
