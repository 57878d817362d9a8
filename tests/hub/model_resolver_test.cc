// Resolution without a network: local paths, WEIGHTS_CACHE_OVERRIDE and the offline cache (the
// downloads themselves are covered end to end against tests/e2e/fake_hub.py).
#include "hub/model_resolver.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "hub/cached_snapshot.h"
#include "hub/downloader.h"
#include "hub/repo_cache.h"
#include "temp_dir.h"

namespace lm::hub {
namespace {

namespace fs = std::filesystem;
const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A cached snapshot as huggingface_hub leaves it: blobs, relative links, refs/main.
void cache_files(const std::string& cache_dir, const std::vector<std::string>& files,
                 const std::string& index = "") {
  RepoCache cache(cache_dir, "org/tiny");
  int n = 0;
  for (const std::string& f : files) {
    const std::string etag = "etag" + std::to_string(n++);
    testing::write_file(cache.blob_path(etag), f == "model.safetensors.index.json" ? index : "x");
    ASSERT_TRUE(cache.link_snapshot_file(kCommit, f, etag).ok());
  }
  ASSERT_TRUE(cache.write_ref("main", kCommit).ok());
}

HubOptions offline_options(const std::string& cache_dir) {
  HubOptions o;
  o.cache_dir = cache_dir;
  o.offline = true;
  o.endpoint = "http://127.0.0.1:9";  // never contacted
  return o;
}

TEST(ModelResolver, LocalPathsAsIs) {
  testing::TempDir dir;
  auto m = resolve_model({dir.path(), std::nullopt, std::nullopt}, offline_options(dir.path()));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->path, dir.path());
  EXPECT_FALSE(m->repo_id);
  for (const char* bad : {"/no/such/folder", "./missing", "models/missing.gguf", "a/b/c"}) {
    auto r = resolve_model({bad, std::nullopt, std::nullopt}, offline_options(dir.path()));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(has(r.error().message, "is not a local folder or file")) << r.error().message;
  }
}

// A local folder with only PyTorch weights lists them for conversion, as a cached snapshot does;
// one with safetensors beside them (an earlier conversion) does not.
TEST(ModelResolver, LocalFolderWithOnlyPytorchWeightsListsThemForConversion) {
  testing::TempDir dir;
  for (const char* f : {"config.json", "tokenizer.json", "pytorch_model.bin"})
    testing::write_file(dir.path() + "/" + f, "x");
  auto m = resolve_model({dir.path(), std::nullopt, std::nullopt}, offline_options(dir.path()));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->pytorch_files, std::vector<std::string>{dir.path() + "/pytorch_model.bin"});
  testing::write_file(dir.path() + "/model.safetensors", "x");
  m = resolve_model({dir.path(), std::nullopt, std::nullopt}, offline_options(dir.path()));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(m->pytorch_files.empty());
  // A file (a GGUF) is never inspected.
  m = resolve_model({dir.path() + "/config.json", std::nullopt, std::nullopt},
                    offline_options(dir.path()));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE(m->pytorch_files.empty());
}

TEST(ModelResolver, OfflineUsesTheCachedSnapshot) {
  testing::TempDir dir;
  cache_files(dir.path(), {"config.json", "tokenizer.json", "model.safetensors"});
  for (const char* revision : {"main", kCommit.c_str()}) {
    auto m = resolve_model({"org/tiny", std::string(revision), std::nullopt},
                           offline_options(dir.path()));
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(m->path, dir.path() + "/models--org--tiny/snapshots/" + kCommit);
    EXPECT_EQ(m->repo_id, "org/tiny");
    EXPECT_EQ(m->commit_sha, kCommit);
    EXPECT_FALSE(m->pipeline_tag);
    EXPECT_FALSE(m->downloaded);
  }
}

TEST(ModelResolver, OfflineNamesWhatIsMissing) {
  testing::TempDir dir;
  cache_files(dir.path(),
              {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors"},
              R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                 "b": "model-00002-of-00002.safetensors"}})");
  auto m = resolve_model({"org/tiny", std::nullopt, std::nullopt}, offline_options(dir.path()));
  ASSERT_FALSE(m.ok());
  const std::string& e = m.error().message;
  EXPECT_TRUE(has(e, "HF_HUB_OFFLINE")) << e;
  EXPECT_TRUE(has(e, "is missing: tokenizer.json, model-00002-of-00002.safetensors.")) << e;

  auto tag = resolve_model({"org/tiny", "v2", std::nullopt}, offline_options(dir.path()));
  ASSERT_FALSE(tag.ok());
  EXPECT_TRUE(has(tag.error().message, "revision 'v2' of org/tiny is not in the cache"))
      << tag.error().message;
  auto other =
      resolve_model({"org/other", std::nullopt, std::nullopt}, offline_options(dir.path()));
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(has(other.error().message, "download-weights org/other")) << other.error().message;
}

TEST(ModelResolver, SnapshotInspection) {
  testing::TempDir dir;
  const std::string snap = dir.path() + "/models--org--tiny/snapshots/" + kCommit;
  cache_files(dir.path(), {"config.json", "tokenizer.json", "pytorch_model.bin"});
  SnapshotContents c = inspect_snapshot(snap);
  EXPECT_TRUE(c.missing.empty());
  EXPECT_EQ(c.format, WeightFormat::kPytorch);
  EXPECT_EQ(c.weight_files, std::vector<std::string>{"pytorch_model.bin"});
  // A link whose blob is gone is missing, by name.
  fs::create_symlink("../../blobs/gone", snap + "/model.safetensors");
  c = inspect_snapshot(snap);
  EXPECT_EQ(c.missing, std::vector<std::string>{"model.safetensors"});
  testing::TempDir empty;
  c = inspect_snapshot(empty.path());
  EXPECT_EQ(c.missing, (std::vector<std::string>{"config.json", "tokenizer.json",
                                                 "the model weights (*.safetensors)"}));
}

TEST(ModelResolver, WeightsCacheOverrideBypassesTheCache) {
  testing::TempDir dir;
  testing::write_file(dir.path() + "/config.json", "{}");
  testing::write_file(dir.path() + "/tokenizer.json", "{}");
  testing::write_file(dir.path() + "/model.safetensors", "x");
  auto m = resolve_model({"org/tiny", std::nullopt, dir.path()}, offline_options("/nonexistent"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->path, dir.path());
  EXPECT_EQ(m->repo_id, "org/tiny");
  fs::remove(dir.path() + "/model.safetensors");
  auto missing = resolve_model({"org/tiny", std::nullopt, dir.path()}, offline_options("/x"));
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(has(missing.error().message, "WEIGHTS_CACHE_OVERRIDE")) << missing.error().message;
}

TEST(ModelResolver, OfflineGgufRepositoryServesTheChosenFile) {
  testing::TempDir dir;
  cache_files(dir.path(), {"README.md", "m-Q4_K_M.gguf", "m-Q8_0-00001-of-00002.gguf",
                           "m-Q8_0-00002-of-00002.gguf", "mmproj-f16.gguf"});
  const std::string snap = dir.path() + "/models--org--tiny/snapshots/" + kCommit;
  auto def = resolve_model({"org/tiny", std::nullopt, std::nullopt}, offline_options(dir.path()));
  ASSERT_TRUE(def.ok()) << def.error().message;
  EXPECT_EQ(def->path, snap + "/m-Q4_K_M.gguf");
  EXPECT_EQ(def->commit_sha, kCommit);
  auto tagged =
      resolve_model({"org/tiny:q8_0", std::nullopt, std::nullopt}, offline_options(dir.path()));
  ASSERT_TRUE(tagged.ok()) << tagged.error().message;
  EXPECT_EQ(tagged->path, snap + "/m-Q8_0-00001-of-00002.gguf");
  EXPECT_EQ(tagged->repo_id, "org/tiny");
  // A shard whose blob is gone is named.
  fs::remove(fs::canonical(snap + "/m-Q8_0-00002-of-00002.gguf"));
  auto broken =
      resolve_model({"org/tiny:Q8_0", std::nullopt, std::nullopt}, offline_options(dir.path()));
  ASSERT_FALSE(broken.ok());
  EXPECT_TRUE(has(broken.error().message, "is missing: m-Q8_0-00002-of-00002.gguf"))
      << broken.error().message;
  auto named = resolve_model({"org/tiny", std::nullopt, std::nullopt, "M-Q4_K_M.GGUF"},
                             offline_options(dir.path()));
  ASSERT_TRUE(named.ok()) << named.error().message;
  EXPECT_EQ(named->path, snap + "/m-Q4_K_M.gguf");
}

TEST(ModelResolver, WeightsCacheOverrideWithGgufFiles) {
  testing::TempDir dir;
  testing::write_file(dir.path() + "/model-Q4_K_M.gguf", "x");
  testing::write_file(dir.path() + "/model-Q5_K_M.gguf", "x");
  auto m =
      resolve_model({"org/tiny:Q5_K_M", std::nullopt, dir.path()}, offline_options("/nonexistent"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->path, dir.path() + "/model-Q5_K_M.gguf");
  EXPECT_EQ(m->repo_id, "org/tiny");
  auto none = resolve_model({"org/tiny:Q2_K", std::nullopt, dir.path()}, offline_options("/x"));
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(has(none.error().message, "model-Q4_K_M.gguf, model-Q5_K_M.gguf"))
      << none.error().message;
}

TEST(Downloader, DurationsAsPythonTimedelta) {
  EXPECT_EQ(format_duration(0.4), "0:00:00");
  EXPECT_EQ(format_duration(3.9), "0:00:03");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(progress_bar(0.0, 4), "[....]");
  EXPECT_EQ(progress_bar(0.5, 4), "[##..]");
  EXPECT_EQ(progress_bar(2.0, 4), "[####]");
  EXPECT_EQ(progress_bar(-1.0, 2), "[..]");
}

}  // namespace
}  // namespace lm::hub
