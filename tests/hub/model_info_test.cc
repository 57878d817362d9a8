#include "hub/model_info.h"

#include <gtest/gtest.h>

namespace lm::hub {
namespace {

TEST(ModelInfo, ParsesTheBlobsAnswer) {
  auto info = parse_model_info(R"({
    "id": "org/name", "sha": "0123456789abcdef0123456789abcdef01234567",
    "pipeline_tag": "text-generation", "private": false,
    "siblings": [
      {"rfilename": "config.json", "size": 614, "blobId": "3b18e512dba79e4c8300dd08aeb37f8e728b8dad"},
      {"rfilename": "model.safetensors", "size": 5000, "blobId": "aaaa",
       "lfs": {"size": 5000, "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "pointerSize": 134}},
      {"rfilename": "README.md"}
    ]})");
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->id, "org/name");
  EXPECT_EQ(info->sha, "0123456789abcdef0123456789abcdef01234567");
  EXPECT_EQ(info->pipeline_tag, "text-generation");
  ASSERT_EQ(info->files.size(), 3u);
  const RepoFile* config = info->find("config.json");
  ASSERT_NE(config, nullptr);
  EXPECT_FALSE(config->lfs);
  EXPECT_EQ(config->etag, "3b18e512dba79e4c8300dd08aeb37f8e728b8dad");
  EXPECT_EQ(config->size, 614u);
  const RepoFile* weights = info->find("model.safetensors");
  ASSERT_NE(weights, nullptr);
  EXPECT_TRUE(weights->lfs);
  EXPECT_EQ(weights->etag, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_FALSE(info->find("README.md")->etag);  // without blobs=True: names only
  EXPECT_EQ(info->find("missing"), nullptr);
}

TEST(ModelInfo, RefusesAnswersWithoutCommitOrFiles) {
  EXPECT_FALSE(parse_model_info(R"({"id": "a", "siblings": []})").ok());
  EXPECT_FALSE(
      parse_model_info(R"({"id": "a", "sha": "0123456789abcdef0123456789abcdef01234567"})").ok());
  EXPECT_FALSE(parse_model_info("[]").ok());
  EXPECT_FALSE(parse_model_info("{").ok());
}

TEST(ModelInfo, UrlsAsHuggingfaceHubBuildsThem) {
  EXPECT_EQ(model_info_url("https://huggingface.co", "org/name", "main"),
            "https://huggingface.co/api/models/org/name/revision/main?blobs=True");
  EXPECT_EQ(model_info_url("http://h", "org/name", "refs/pr/1"),
            "http://h/api/models/org/name/revision/refs%2Fpr%2F1?blobs=True");
  EXPECT_EQ(resolve_url("http://h", "org/name", "0123456789abcdef0123456789abcdef01234567",
                        "sub dir/model.safetensors"),
            "http://h/org/name/resolve/0123456789abcdef0123456789abcdef01234567/"
            "sub%20dir/model.safetensors");
  EXPECT_EQ(url_quote("a b/c~d", ""), "a%20b%2Fc~d");
}

TEST(ModelInfo, NormalizesEtags) {
  EXPECT_EQ(normalize_etag("\"abc\""), "abc");
  EXPECT_EQ(normalize_etag("W/\"abc\""), "abc");
  EXPECT_EQ(normalize_etag("abc"), "abc");
}

}  // namespace
}  // namespace lm::hub
