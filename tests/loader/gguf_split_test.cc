// A model split by gguf-split opens as one GgufFile from its first shard; each way a split can be
// broken gives one error naming the file at fault. Shards are built by hand so each test breaks
// exactly one thing; tests/e2e/test_gguf_hub.py serves a real model split by gguf-py.
#include "loader/gguf_split.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "loader/gguf_file.h"
#include "test_files.h"

namespace lm {
namespace {

namespace fs = std::filesystem;
using testing::Bytes;

constexpr uint32_t kString = 8, kU16 = 2, kI32 = 5;

struct Shard {
  std::optional<uint16_t> split_no;
  std::optional<uint16_t> split_count;
  int32_t tensors_count = 3;
  std::vector<std::string> tensors;  // each an F32 [4] filled with its shard number
  bool model_metadata = false;
};

std::vector<uint8_t> shard_bytes(const Shard& s, float fill) {
  Bytes b;
  const uint64_t num_kv =
      (s.model_metadata ? 1 : 0) + (s.split_no ? 1 : 0) + (s.split_count ? 1 : 0) + 1;
  b.put<uint32_t>(0x46554747)
      .put<uint32_t>(3)
      .put<uint64_t>(s.tensors.size())
      .put<uint64_t>(num_kv);
  if (s.model_metadata) b.str("general.architecture").put<uint32_t>(kString).str("llama");
  if (s.split_no) b.str(kGgufSplitNo).put<uint32_t>(kU16).put<uint16_t>(*s.split_no);
  if (s.split_count) b.str(kGgufSplitCount).put<uint32_t>(kU16).put<uint16_t>(*s.split_count);
  b.str(kGgufSplitTensorsCount).put<uint32_t>(kI32).put<int32_t>(s.tensors_count);
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    b.str(s.tensors[i]).put<uint32_t>(1).put<uint64_t>(4).put<uint32_t>(0).put<uint64_t>(32 * i);
  }
  b.pad_to(32);
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    for (int j = 0; j < 4; ++j) b.put<float>(fill + static_cast<float>(i));
    b.pad_to(32);
  }
  return b.data;
}

// A folder holding "model-0000i-of-00003.gguf" for the given shards (nullopt: left out).
class SplitDir {
 public:
  explicit SplitDir(const std::vector<std::optional<Shard>>& shards) {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("lm_split_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
    for (size_t i = 0; i < shards.size(); ++i) {
      if (!shards[i]) continue;
      const auto bytes = shard_bytes(*shards[i], 10.0f * static_cast<float>(i + 1));
      std::ofstream(path(i), std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
    }
  }
  ~SplitDir() { fs::remove_all(dir_); }
  std::string path(size_t idx) const {
    return gguf_split_path((dir_ / "model").string(), static_cast<int64_t>(idx), 3);
  }

 private:
  fs::path dir_;
};

std::vector<std::optional<Shard>> good_shards() {
  return {Shard{0, 3, 3, {"a", "b"}, true}, Shard{1, 3, 3, {"c"}}, Shard{2, 3, 3, {}}};
}

std::string open_error(const SplitDir& dir, size_t idx = 0) {
  auto r = GgufFile::open(dir.path(idx));
  return r.ok() ? "" : r.error().message;
}

TEST(GgufSplit, NamesShardsAsGgufSplit) {
  EXPECT_EQ(gguf_split_path("/m/Model-Q4_K_M", 0, 3), "/m/Model-Q4_K_M-00001-of-00003.gguf");
  EXPECT_EQ(gguf_split_path("x", 11, 12), "x-00012-of-00012.gguf");
}

TEST(GgufSplit, FirstShardBindsTheTensorsOfAll) {
  SplitDir dir(good_shards());
  auto gguf = GgufFile::open(dir.path(0));
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  EXPECT_EQ(**gguf->get_string("general.architecture"), "llama");
  ASSERT_EQ(gguf->tensor_infos().size(), 3u);
  // Each tensor's bytes come from its own shard's mapping: shard i is filled with 10*(i+1)+k.
  for (const auto& [name, value] : {std::pair{"a", 10.0f}, {"b", 11.0f}, {"c", 20.0f}}) {
    const GgufTensorInfo* info = gguf->find_tensor(name);
    ASSERT_NE(info, nullptr) << name;
    const Tensor t = gguf->tensor(*info);
    EXPECT_EQ(t.shape, (Shape{4}));
    EXPECT_EQ(static_cast<const float*>(t.data)[3], value) << name;
    gguf->drop_pages(t.data, 16);  // any shard's bytes (checked inside the mapping)
  }
  EXPECT_EQ(gguf->find_tensor("c")->shard_idx, 1u);
}

TEST(GgufSplit, AnUnsplitFileIsUnchanged) {
  Shard single{std::nullopt, std::nullopt, 1, {"a"}, true};
  const auto bytes = shard_bytes(single, 1.0f);
  testing::TempFile f(bytes, ".gguf");
  auto gguf = GgufFile::open(f.path());
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  EXPECT_EQ(gguf->tensor_infos().size(), 1u);
}

TEST(GgufSplit, ALaterShardIsRefusedWithTheFirstNamed) {
  SplitDir dir(good_shards());
  const std::string e = open_error(dir, 1);
  EXPECT_NE(e.find(dir.path(1) + " is shard 2 of 3"), std::string::npos) << e;
  EXPECT_NE(e.find("-00001-of-00003.gguf"), std::string::npos) << e;
}

TEST(GgufSplit, AMissingShardIsNamed) {
  auto shards = good_shards();
  shards[2].reset();
  SplitDir dir(shards);
  const std::string e = open_error(dir);
  EXPECT_EQ(e.rfind(dir.path(2) + ": missing shard 3 of 3", 0), 0u) << e;
}

TEST(GgufSplit, AShardWithAnotherCountIsNamed) {
  auto shards = good_shards();
  shards[1]->split_count = 4;
  SplitDir dir(shards);
  const std::string e = open_error(dir);
  EXPECT_EQ(e.rfind(dir.path(1) + ": split.count is 4, but the first shard", 0), 0u) << e;
}

TEST(GgufSplit, AShardOutOfPlaceIsNamed) {
  auto shards = good_shards();
  shards[2]->split_no = 1;
  SplitDir dir(shards);
  const std::string e = open_error(dir);
  EXPECT_EQ(e.rfind(dir.path(2) + ": split.no is 1, expected 2", 0), 0u) << e;
}

TEST(GgufSplit, ATensorInTwoShardsIsNamed) {
  auto shards = good_shards();
  shards[2]->tensors = {"b"};
  SplitDir dir(shards);
  const std::string e = open_error(dir);
  EXPECT_EQ(e.rfind(dir.path(2) + ": tensor 'b' is also in an earlier shard", 0), 0u) << e;
}

TEST(GgufSplit, TensorsMustAddUpToSplitTensorsCount) {
  auto shards = good_shards();
  for (auto& s : shards) s->tensors_count = 4;
  SplitDir dir(shards);
  const std::string e = open_error(dir);
  EXPECT_NE(e.find("the 3 shards hold 3 tensors, but split.tensors.count says 4"),
            std::string::npos)
      << e;
}

TEST(GgufSplit, ARenamedFirstShardSaysWhyTheOthersAreNotFound) {
  SplitDir dir(good_shards());
  const std::string renamed = dir.path(0) + ".renamed.gguf";
  fs::copy_file(dir.path(0), renamed);
  auto r = GgufFile::open(renamed);
  fs::remove(renamed);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("does not end in -00001-of-00003.gguf"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace lm
