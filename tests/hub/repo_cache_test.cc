#include "hub/repo_cache.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "temp_dir.h"

namespace lm::hub {
namespace {

namespace fs = std::filesystem;
const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kCommit2 = "fedcba9876543210fedcba9876543210fedcba98";

TEST(RepoCache, FolderNamesAsHuggingfaceHub) {
  EXPECT_EQ(repo_folder_name("NousResearch/Llama-2-7b-chat-hf"),
            "models--NousResearch--Llama-2-7b-chat-hf");
  EXPECT_EQ(repo_folder_name("gpt2"), "models--gpt2");
}

TEST(RepoCache, CommitHashes) {
  EXPECT_TRUE(is_commit_hash(kCommit));
  EXPECT_FALSE(is_commit_hash("main"));
  EXPECT_FALSE(is_commit_hash(kCommit.substr(1)));
  EXPECT_FALSE(is_commit_hash("0123456789ABCDEF0123456789abcdef01234567"));
}

TEST(RepoCache, RepoIds) {
  for (const char* ok : {"org/name", "gpt2", "NousResearch/Llama-2-7b-chat-hf", "a.b/c_d-1"})
    EXPECT_TRUE(is_valid_repo_id(ok)) << ok;
  for (const char* bad : {"", "a/b/c", "/abs", "./x", "../x", "org/", "/name", "a--b/c", "a/b..c",
                          "x/y.git", "-a/b", "a/b-", "a b/c", "models/x.gguf/"})
    EXPECT_FALSE(is_valid_repo_id(bad)) << bad;
}

TEST(RepoCache, RelativeNamesAndEtags) {
  EXPECT_TRUE(check_relative_name("revision", "main").ok());
  EXPECT_TRUE(check_relative_name("revision", "refs/pr/1").ok());
  for (const char* bad : {"", "../x", "/x", "a//b", "a/./b", "a/..", "a\\b"})
    EXPECT_FALSE(check_relative_name("file name", bad).ok()) << bad;
  EXPECT_TRUE(check_etag("3b18e512dba79e4c8300dd08aeb37f8e728b8dad").ok());
  for (const char* bad : {"", "../x", "a/b", ".hidden"}) EXPECT_FALSE(check_etag(bad).ok()) << bad;
}

TEST(RepoCache, Paths) {
  RepoCache cache("/data", "org/name");
  EXPECT_EQ(cache.dir(), "/data/models--org--name");
  EXPECT_EQ(cache.blob_path("abc"), "/data/models--org--name/blobs/abc");
  EXPECT_EQ(cache.incomplete_path("abc"), "/data/models--org--name/blobs/abc.incomplete");
  EXPECT_EQ(cache.lock_path("abc"), "/data/.locks/models--org--name/abc.lock");
  EXPECT_EQ(cache.snapshot_path(kCommit, "config.json"),
            "/data/models--org--name/snapshots/" + kCommit + "/config.json");
}

TEST(RepoCache, RefsWithoutNewlineAndNested) {
  testing::TempDir dir;
  RepoCache cache(dir.path(), "org/name");
  EXPECT_FALSE(cache.read_ref("main"));
  ASSERT_TRUE(cache.write_ref("main", kCommit).ok());
  EXPECT_EQ(testing::read_file(cache.dir() + "/refs/main"), kCommit);  // verbatim, no newline
  EXPECT_EQ(cache.read_ref("main"), kCommit);
  ASSERT_TRUE(cache.write_ref("refs/pr/1", kCommit2).ok());
  EXPECT_EQ(testing::read_file(cache.dir() + "/refs/refs/pr/1"), kCommit2);
  ASSERT_TRUE(cache.write_ref("main", kCommit2).ok());  // a moved branch
  EXPECT_EQ(cache.resolve_revision("main"), kCommit2);
  EXPECT_EQ(cache.resolve_revision(kCommit), kCommit);  // a commit needs no ref
  EXPECT_FALSE(cache.resolve_revision("v1.0"));
  EXPECT_FALSE(cache.write_ref("../evil", kCommit).ok());
  // Nothing but refs under refs/ (a scan would read a stray temp file as a ref).
  int entries = 0;
  for (const auto& e : fs::recursive_directory_iterator(cache.dir() + "/refs"))
    entries += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(entries, 2);
}

TEST(RepoCache, ReadsATreeWrittenByHuggingfaceHub) {
  testing::TempDir dir;
  const std::string repo = dir.path() + "/models--org--name";
  testing::write_file(repo + "/refs/main", kCommit + "\n");  // tolerated
  testing::write_file(repo + "/blobs/aaa", "{}");
  fs::create_directories(repo + "/snapshots/" + kCommit);
  fs::create_symlink("../../blobs/aaa", repo + "/snapshots/" + kCommit + "/config.json");
  fs::create_symlink("../../blobs/gone", repo + "/snapshots/" + kCommit + "/model.safetensors");
  RepoCache cache(dir.path(), "org/name");
  EXPECT_EQ(cache.resolve_revision("main"), kCommit);
  EXPECT_TRUE(cache.has_file(kCommit, "config.json"));
  EXPECT_FALSE(cache.has_file(kCommit, "model.safetensors"));  // dangling link
  EXPECT_FALSE(cache.has_file(kCommit, "tokenizer.json"));
  testing::write_file(repo + "/refs/broken", "not a sha");
  EXPECT_FALSE(cache.read_ref("broken"));
}

TEST(RepoCache, SnapshotLinksAreRelative) {
  testing::TempDir dir;
  RepoCache cache(dir.path(), "org/name");
  testing::write_file(cache.blob_path("e1"), "one");
  testing::write_file(cache.blob_path("e2"), "two");
  ASSERT_TRUE(cache.link_snapshot_file(kCommit, "config.json", "e1").ok());
  ASSERT_TRUE(cache.link_snapshot_file(kCommit, "sub/dir/file.txt", "e2").ok());
  EXPECT_EQ(fs::read_symlink(cache.snapshot_path(kCommit, "config.json")), "../../blobs/e1");
  EXPECT_EQ(fs::read_symlink(cache.snapshot_path(kCommit, "sub/dir/file.txt")),
            "../../../../blobs/e2");
  EXPECT_EQ(testing::read_file(cache.snapshot_path(kCommit, "sub/dir/file.txt")), "two");
  // A stale link is replaced.
  ASSERT_TRUE(cache.link_snapshot_file(kCommit, "config.json", "e2").ok());
  EXPECT_EQ(testing::read_file(cache.snapshot_path(kCommit, "config.json")), "two");
  EXPECT_FALSE(cache.link_snapshot_file(kCommit, "../x", "e1").ok());
  EXPECT_FALSE(cache.link_snapshot_file(kCommit, "x", "../e1").ok());
}

}  // namespace
}  // namespace lm::hub
