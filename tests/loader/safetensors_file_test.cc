#include "loader/safetensors_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "loader/safetensors_index.h"
#include "loader/weight_store.h"
#include "test_files.h"

namespace lm {
namespace {

using testing::Bytes;
using testing::TempFile;

std::vector<uint8_t> make_safetensors(const std::string& header, size_t data_bytes) {
  Bytes b;
  b.put<uint64_t>(header.size()).raw(header);
  for (size_t i = 0; i < data_bytes; ++i) b.put<uint8_t>(static_cast<uint8_t>(i));
  return b.data;
}

std::string open_error(const std::string& header, size_t data_bytes = 16) {
  TempFile f(make_safetensors(header, data_bytes), ".safetensors");
  auto r = SafetensorsFile::open(f.path());
  if (r.ok()) return "";
  EXPECT_NE(r.error().message.find(f.path()), std::string::npos);
  return r.error().message;
}

TEST(SafetensorsFile, ReadsValidFile) {
  TempFile f(
      make_safetensors(
          R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
          R"("h":{"dtype":"BF16","shape":[2],"data_offsets":[16,20]}})",
          20),
      ".safetensors");
  auto st = SafetensorsFile::open(f.path());
  ASSERT_TRUE(st.ok()) << st.error().message;
  ASSERT_EQ(st->tensors().size(), 2u);
  const Tensor& w = st->tensors().at("w");
  EXPECT_EQ(w.shape, (Shape{2, 2}));
  EXPECT_EQ(static_cast<const uint8_t*>(w.data)[1], 1);
  EXPECT_EQ(st->tensors().at("h").dtype, DType::kBF16);
}

// The in-memory entry points (tests, fuzzing): the same checks, views into the caller's bytes.
TEST(SafetensorsFile, ParsesCallerOwnedBytesAndIndexText) {
  const std::vector<uint8_t> bytes =
      make_safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
  auto st = SafetensorsFile::parse(bytes, "in-memory.safetensors");
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(st->path(), "in-memory.safetensors");
  const Tensor& w = st->tensors().at("w");
  EXPECT_TRUE(st->contains(w.data, 8));
  EXPECT_FALSE(st->contains(w.data, 9));
  st->drop_pages(w.data, 8);  // no mapping: nothing to drop, no failure
  auto bad = SafetensorsFile::parse(
      make_safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4), "mem");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("mem: ", 0), 0u) << bad.error().message;

  auto index = parse_safetensors_index(
      R"({"weight_map": {"b": "s2.safetensors", "a": "s1.safetensors", "c": "s2.safetensors"}})",
      "index.json");
  ASSERT_TRUE(index.ok()) << index.error().message;
  EXPECT_EQ(index->shard_names, (std::vector<std::string>{"s1.safetensors", "s2.safetensors"}));
  EXPECT_EQ(index->weight_map.at("c"), "s2.safetensors");
  for (const char* hostile :
       {R"([1])", R"({"weight_map": []})", R"({"weight_map": {"a": 1}})",
        R"({"weight_map": {"a": "../x"}})", R"({"weight_map": {"a": ""}})", "{"}) {
    auto r = parse_safetensors_index(hostile, "index.json");
    ASSERT_FALSE(r.ok()) << hostile;
    EXPECT_EQ(r.error().message.rfind("index.json: ", 0), 0u) << r.error().message;
  }
}

TEST(SafetensorsFile, RejectsHostileFiles) {
  EXPECT_NE(open_error("{", 0).find("not a JSON object"), std::string::npos);
  EXPECT_NE(open_error(R"({"w":{"dtype":"U16","shape":[2],"data_offsets":[0,4]}})")
                .find("unsupported dtype U16"),
            std::string::npos);
  EXPECT_NE(
      open_error(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,1600]}})").find("outside"),
      std::string::npos);
  EXPECT_NE(
      open_error(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})").find("needs 12"),
      std::string::npos);
  EXPECT_NE(
      open_error(
          R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,16]}})")
          .find("absurd"),
      std::string::npos);
  EXPECT_NE(open_error(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,16]}})")
                .find("non-negative"),
            std::string::npos);
  EXPECT_NE(open_error(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,0]}})").find("outside"),
            std::string::npos);
  EXPECT_NE(open_error(R"({"w":{"dtype":"F32","shape":[4]}})").find("data_offsets"),
            std::string::npos);
  EXPECT_NE(open_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})")
                .find("duplicate tensor 'w'"),
            std::string::npos);
  // Header length past the end of the file.
  Bytes b;
  b.put<uint64_t>(1ull << 40).raw("{}");
  TempFile f(b.data, ".safetensors");
  auto r = SafetensorsFile::open(f.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("exceeds the file"), std::string::npos);
}

class ShardedFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("lm_shards_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::ofstream(dir_ / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(ShardedFolder, LoadsShardsNamedByIndex) {
  write("model-00001-of-00002.safetensors",
        make_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8));
  write("model-00002-of-00002.safetensors",
        make_safetensors(R"({"b":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", 8));
  write("model.safetensors.index.json",
        std::string(R"({"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
                    R"("b":"model-00002-of-00002.safetensors"}})"));
  auto store = WeightStore::from_hf_folder(dir_.string());
  ASSERT_TRUE(store.ok()) << store.error().message;
  ASSERT_NE(store->find("a"), nullptr);
  ASSERT_NE(store->find("b"), nullptr);
  EXPECT_EQ(store->find("b")->dtype, DType::kF16);
}

TEST_F(ShardedFolder, ReportsMissingTensorsAndBadShardNames) {
  write("model-00001-of-00001.safetensors",
        make_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8));
  write(
      "model.safetensors.index.json",
      std::string(
          R"({"weight_map":{"a":"model-00001-of-00001.safetensors","c":"model-00001-of-00001.safetensors"}})"));
  auto store = WeightStore::from_hf_folder(dir_.string());
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message.find("'c'"), std::string::npos);
  write("model.safetensors.index.json", std::string(R"({"weight_map":{"a":"../../etc/passwd"}})"));
  store = WeightStore::from_hf_folder(dir_.string());
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message.find("plain file name"), std::string::npos);
  write("model.safetensors.index.json", std::string(R"({"weight_map":[1,2]})"));
  EXPECT_FALSE(WeightStore::from_hf_folder(dir_.string()).ok());
}

TEST_F(ShardedFolder, ReportsFolderWithoutWeights) {
  auto store = WeightStore::from_hf_folder(dir_.string());
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message.find("no model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace lm
