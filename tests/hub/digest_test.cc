#include "hub/digest.h"

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace lm::hub {
namespace {

TEST(Digest, Sha256OfKnownStrings) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Digest, GitBlobSha1AsGitHashObject) {
  // `git hash-object` of an empty file and of "hello world\n".
  EXPECT_EQ(git_blob_sha1_hex(""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
  EXPECT_EQ(git_blob_sha1_hex("hello world\n"), "3b18e512dba79e4c8300dd08aeb37f8e728b8dad");
}

TEST(Digest, StreamingEqualsOneShot) {
  const std::string text = "The quick brown fox jumps over the lazy dog";
  for (DigestKind kind : {DigestKind::kSha256, DigestKind::kGitBlobSha1}) {
    Digest d(kind, text.size());
    d.update(text.data(), 10);
    d.update(text.data() + 10, text.size() - 10);
    EXPECT_EQ(d.hex(), kind == DigestKind::kSha256 ? sha256_hex(text) : git_blob_sha1_hex(text));
  }
}

TEST(Digest, OfAFile) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/f";
  testing::write_file(path, "hello world\n");
  EXPECT_EQ(*file_digest_hex(path, DigestKind::kGitBlobSha1),
            "3b18e512dba79e4c8300dd08aeb37f8e728b8dad");
  EXPECT_EQ(*file_digest_hex(path, DigestKind::kSha256), sha256_hex("hello world\n"));
  EXPECT_FALSE(file_digest_hex(dir.path() + "/missing", DigestKind::kSha256).ok());
}

}  // namespace
}  // namespace lm::hub
