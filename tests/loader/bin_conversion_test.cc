#include "loader/bin_conversion.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loader/safetensors_file.h"
#include "loader/weight_store.h"
#include "zip_builder.h"

namespace lm {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(LM_REPO_ROOT) / "tests/fixtures/torch_bin";
constexpr const char* kMarker = "/tmp/lm_pwned";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A safetensors file as header JSON and per-tensor bytes, read without our loader so any dtype
// compares (the loader itself maps only F32/F16/BF16).
struct SafetensorsContent {
  nlohmann::json metadata;
  std::map<std::string, std::pair<nlohmann::json, std::string>> tensors;  // header entry, bytes
};

SafetensorsContent read_safetensors(const fs::path& path) {
  const std::string bytes = read_file(path);
  SafetensorsContent c;
  EXPECT_GE(bytes.size(), 8u) << path;
  if (bytes.size() < 8) return c;
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  auto header = nlohmann::json::parse(bytes.substr(8, header_len));
  const std::string data = bytes.substr(8 + header_len);
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      c.metadata = entry;
      continue;
    }
    const auto begin = entry["data_offsets"][0].get<size_t>();
    const auto end = entry["data_offsets"][1].get<size_t>();
    c.tensors[name] = {entry, data.substr(begin, end - begin)};
  }
  return c;
}

// Same tensors, dtypes, shapes, elements and metadata; and since our writer lays files out as
// safetensors.torch.save_file does, the very same bytes.
void expect_same_safetensors(const fs::path& actual, const fs::path& expected) {
  SCOPED_TRACE(actual.string());
  const SafetensorsContent a = read_safetensors(actual);
  const SafetensorsContent e = read_safetensors(expected);
  EXPECT_EQ(a.metadata, e.metadata);
  ASSERT_EQ(a.tensors.size(), e.tensors.size());
  for (const auto& [name, want] : e.tensors) {
    auto it = a.tensors.find(name);
    ASSERT_NE(it, a.tensors.end()) << name;
    EXPECT_EQ(it->second.first["dtype"], want.first["dtype"]) << name;
    EXPECT_EQ(it->second.first["shape"], want.first["shape"]) << name;
    EXPECT_EQ(it->second.second, want.second) << name << ": elements differ";
  }
  EXPECT_EQ(read_file(actual), read_file(expected));
}

class BinConversion : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lm_bin_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A copy of a fixture case folder to convert in.
  fs::path copy_case(const std::string& name) {
    const fs::path to = dir_ / name;
    fs::copy(kFixtures / name, to, fs::copy_options::recursive);
    return to;
  }
  std::vector<std::string> files_in(const fs::path& folder) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

TEST(SafetensorsNameForBin, FollowsTgi) {
  EXPECT_EQ(safetensors_name_for_bin("pytorch_model.bin"), "model.safetensors");
  EXPECT_EQ(safetensors_name_for_bin("pytorch_model-00001-of-00002.bin"),
            "model-00001-of-00002.safetensors");
  EXPECT_EQ(safetensors_name_for_bin("consolidated.bin"), "consolidated.safetensors");
  EXPECT_EQ(safetensors_name_for_bin("my_pytorch_model.bin"), "my_pytorch_model.safetensors");
}

TEST_F(BinConversion, ConvertsEveryDTypeExactly) {
  const fs::path folder = copy_case("dtypes");
  auto files = convert_bin_checkpoints(folder.string());
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_EQ(*files, std::vector<std::string>{"model.safetensors"});
  expect_same_safetensors(folder / "model.safetensors",
                          kFixtures / "reference/dtypes/model.safetensors");
  EXPECT_EQ(files_in(folder), (std::vector<std::string>{"model.safetensors", "pytorch_model.bin"}));
}

TEST_F(BinConversion, ConvertsSharedAndStridedViews) {
  const fs::path folder = copy_case("views");
  auto files = convert_bin_checkpoints(folder.string());
  ASSERT_TRUE(files.ok()) << files.error().message;
  expect_same_safetensors(folder / "model.safetensors",
                          kFixtures / "reference/views/model.safetensors");
  // shared.b is the very same tensor as shared.a: written once, recorded in __metadata__.
  const SafetensorsContent c = read_safetensors(folder / "model.safetensors");
  EXPECT_EQ(c.metadata["shared.b"], "shared.a");
  EXPECT_FALSE(c.tensors.count("shared.b"));
  EXPECT_TRUE(c.tensors.count("transposed"));
  // The loader maps the result.
  auto store = WeightStore::from_hf_folder(folder.string());
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ(store->find("transposed")->shape, (Shape{6, 4}));
  EXPECT_EQ(store->find("permuted")->dtype, DType::kBF16);
}

TEST_F(BinConversion, DropsATiedLmHeadTheLoaderRestoresFromTheEmbedding) {
  const fs::path folder = copy_case("tied");
  auto files = convert_bin_checkpoints(folder.string());
  ASSERT_TRUE(files.ok()) << files.error().message;
  expect_same_safetensors(folder / "model.safetensors",
                          kFixtures / "reference/tied/model.safetensors");
  auto st = SafetensorsFile::open((folder / "model.safetensors").string());
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(st->tensors().count("model.embed_tokens.weight"));
  EXPECT_FALSE(st->tensors().count("lm_head.weight"));
  EXPECT_EQ(read_safetensors(folder / "model.safetensors").metadata["lm_head.weight"],
            "model.embed_tokens.weight");
}

TEST_F(BinConversion, ConvertsShardsAndWritesTheIndex) {
  const fs::path folder = copy_case("sharded");
  auto files = convert_bin_checkpoints(folder.string());
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_EQ(*files, (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                              "model-00002-of-00002.safetensors"}));
  for (const std::string& f : *files) {
    expect_same_safetensors(folder / f, kFixtures / "reference/sharded" / f);
  }
  EXPECT_EQ(nlohmann::json::parse(read_file(folder / "model.safetensors.index.json")),
            nlohmann::json::parse(
                read_file(kFixtures / "reference/sharded/model.safetensors.index.json")));
  auto store = WeightStore::from_hf_folder(folder.string());
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ(store->tensors().size(), 4u);
  EXPECT_EQ(store->find("model.layers.1.w")->dtype, DType::kF16);
}

TEST_F(BinConversion, SkipsTargetsThatAreUpToDate) {
  const fs::path folder = copy_case("sharded");
  ASSERT_TRUE(convert_bin_checkpoints(folder.string()).ok());
  const fs::path first = folder / "model-00001-of-00002.safetensors";
  const fs::path second = folder / "model-00002-of-00002.safetensors";
  // Mark both outputs so a rewrite would show; both stay newer than their sources.
  const auto later = fs::file_time_type::clock::now() + std::chrono::hours(1);
  fs::last_write_time(first, later);
  fs::last_write_time(second, later);
  fs::last_write_time(folder / "model.safetensors.index.json", later);
  const auto inode = [](const fs::path& p) {
    struct stat st {};
    ::stat(p.c_str(), &st);
    return st.st_ino;
  };
  const auto first_inode = inode(first);
  const auto second_inode = inode(second);
  ASSERT_TRUE(convert_bin_checkpoints(folder.string()).ok());
  EXPECT_EQ(inode(first), first_inode);
  EXPECT_EQ(inode(second), second_inode);
  // A .bin newer than its target is converted again; the other shard is left alone.
  fs::last_write_time(folder / "pytorch_model-00002-of-00002.bin", later + std::chrono::hours(1));
  ASSERT_TRUE(convert_bin_checkpoints(folder.string()).ok());
  EXPECT_EQ(inode(first), first_inode);
  EXPECT_NE(inode(second), second_inode);
  expect_same_safetensors(second, kFixtures / "reference/sharded" / second.filename());
}

TEST_F(BinConversion, WritesRegularFilesInAHubSnapshot) {
  // models--org--name/{blobs/<hash>, snapshots/<rev>/pytorch_model.bin -> ../../blobs/<hash>}
  const fs::path repo = dir_ / "models--org--tied";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots/abc123");
  fs::copy_file(kFixtures / "tied/pytorch_model.bin", repo / "blobs/0123abcd");
  fs::create_symlink("../../blobs/0123abcd", repo / "snapshots/abc123/pytorch_model.bin");
  const fs::path snapshot = repo / "snapshots/abc123";
  auto files = convert_bin_checkpoints(snapshot.string());
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(snapshot / "model.safetensors")));
  EXPECT_TRUE(fs::is_symlink(snapshot / "pytorch_model.bin"));
  EXPECT_EQ(files_in(repo / "blobs"), std::vector<std::string>{"0123abcd"});
  expect_same_safetensors(snapshot / "model.safetensors",
                          kFixtures / "reference/tied/model.safetensors");
}

TEST_F(BinConversion, ConvertsLooseBinsWithTgisFilter) {
  fs::copy_file(kFixtures / "tied/pytorch_model.bin", dir_ / "consolidated.bin");
  fs::copy_file(kFixtures / "malicious/os_system.bin", dir_ / "training_args.bin");
  { std::ofstream(dir_ / "notes.bin") << "not a zip"; }
  auto files = convert_bin_checkpoints(dir_.string());
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_EQ(*files, std::vector<std::string>{"consolidated.safetensors"});
  // The one output is not model.safetensors, so an index points the loader at it.
  auto store = WeightStore::from_hf_folder(dir_.string());
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_NE(store->find("model.embed_tokens.weight"), nullptr);
}

TEST_F(BinConversion, RefusesMaliciousCheckpointsWithoutLeavingFiles) {
  std::filesystem::remove(kMarker);
  for (const char* name : {"os_system.bin", "builtins_eval.bin", "unknown_global.bin"}) {
    const fs::path folder = dir_ / name;
    fs::create_directories(folder);
    fs::copy_file(kFixtures / "malicious" / name, folder / "pytorch_model.bin");
    auto files = convert_bin_checkpoints(folder.string());
    ASSERT_FALSE(files.ok()) << name;
    EXPECT_NE(files.error().message.find("refusing global"), std::string::npos)
        << files.error().message;
    EXPECT_EQ(files_in(folder), std::vector<std::string>{"pytorch_model.bin"});
  }
  EXPECT_FALSE(fs::exists(kMarker));
}

TEST_F(BinConversion, ChecksTheBinIndexAgainstTheShards) {
  const fs::path folder = copy_case("sharded");
  auto index = nlohmann::json::parse(read_file(folder / "pytorch_model.bin.index.json"));
  index["weight_map"]["ghost.weight"] = "pytorch_model-00001-of-00002.bin";
  std::ofstream(folder / "pytorch_model.bin.index.json") << index.dump();
  auto files = convert_bin_checkpoints(folder.string());
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.error().message.find("'ghost.weight'"), std::string::npos);
  EXPECT_FALSE(fs::exists(folder / "model.safetensors.index.json"));

  index["weight_map"]["ghost.weight"] = "../../etc/passwd.bin";
  std::ofstream(folder / "pytorch_model.bin.index.json") << index.dump();
  files = convert_bin_checkpoints(folder.string());
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.error().message.find("plain *.bin file name"), std::string::npos);
}

TEST_F(BinConversion, RefusesViewsThatWouldBlowUpOnDisk) {
  // One float expanded (stride 0) to 2^25 elements: 128 MiB out of a few hundred bytes.
  namespace pk = testing::pk;
  const std::string pickle = pk::state_dict({{"w", pk::tensor("0", 1, 0, {1 << 25}, {0})}});
  const fs::path bin = dir_ / "pytorch_model.bin";
  const auto bytes = testing::make_torch_zip(pickle, {{"0", std::string(4, '\0')}});
  std::ofstream(bin, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  auto files = convert_bin_checkpoints(dir_.string());
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.error().message.find("refusing to convert"), std::string::npos);
  EXPECT_EQ(files_in(dir_), std::vector<std::string>{"pytorch_model.bin"});
}

TEST_F(BinConversion, ReportsAFolderWithoutBins) {
  auto files = convert_bin_checkpoints(dir_.string());
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.error().message.find("no PyTorch .bin weights"), std::string::npos);
}

}  // namespace
}  // namespace lm
