#include "loader/safetensors_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "loader/safetensors_file.h"
#include "loader/strided_gather.h"

namespace lm {
namespace {

namespace fs = std::filesystem;

class WriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lm_writer_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

template <typename T>
std::span<const uint8_t> bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

TEST_F(WriterTest, WritesWhatTheLoaderReads) {
  auto layout = layout_safetensors({{"w", "F32", {2, 3}}, {"b", "BF16", {3}}, {"a", "F32", {1}}},
                                   {{"format", "pt"}}, "test");
  ASSERT_TRUE(layout.ok()) << layout.error().message;
  // Wider dtypes first, then by name; the header is padded to 8 bytes.
  ASSERT_EQ(layout->tensors.size(), 3u);
  EXPECT_EQ(layout->tensors[0].name, "a");
  EXPECT_EQ(layout->tensors[1].name, "w");
  EXPECT_EQ(layout->tensors[2].name, "b");
  EXPECT_EQ(layout->header.size() % 8, 0u);
  EXPECT_EQ(
      layout->header.rfind(
          R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)",
          0),
      0u);
  EXPECT_EQ(layout->data_bytes, 4u + 24 + 6);

  auto writer = SafetensorsWriter::create(path("out.safetensors"), std::move(layout).value());
  ASSERT_TRUE(writer.ok()) << writer.error().message;
  const std::vector<float> a = {7.0f};
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  const std::vector<uint16_t> b = {0x3f80, 0x4000, 0x4040};
  ASSERT_TRUE(writer->append(bytes_of(a)).ok());
  ASSERT_TRUE(writer->append(bytes_of(w).subspan(0, 5)).ok());  // any split
  ASSERT_TRUE(writer->append(bytes_of(w).subspan(5)).ok());
  ASSERT_TRUE(writer->append(bytes_of(b)).ok());
  EXPECT_FALSE(fs::exists(path("out.safetensors")));  // nothing under the name until finished
  ASSERT_TRUE(writer->finish().ok());
  EXPECT_FALSE(fs::exists(path("out.safetensors.tmp")));

  auto st = SafetensorsFile::open(path("out.safetensors"));
  ASSERT_TRUE(st.ok()) << st.error().message;
  const Tensor& wt = st->tensors().at("w");
  EXPECT_EQ(wt.shape, (Shape{2, 3}));
  EXPECT_EQ(wt.as<const float>()[5], 6.0f);
  EXPECT_EQ(st->tensors().at("a").as<const float>()[0], 7.0f);
  EXPECT_EQ(st->tensors().at("b").as<const uint16_t>()[2], 0x4040);
}

TEST_F(WriterTest, NeverLeavesAnIncompleteFile) {
  {
    auto writer = SafetensorsWriter::create(path("x.safetensors"),
                                            *layout_safetensors({{"w", "F32", {4}}}, {}, "test"));
    ASSERT_TRUE(writer.ok());
    EXPECT_TRUE(fs::exists(path("x.safetensors.tmp")));
    const std::vector<float> two = {1, 2};
    ASSERT_TRUE(writer->append(bytes_of(two)).ok());
    EXPECT_NE(writer->finish().error().message.find("only 8 of 16"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(path("x.safetensors")));
  EXPECT_FALSE(fs::exists(path("x.safetensors.tmp")));
  {
    auto writer = SafetensorsWriter::create(path("y.safetensors"),
                                            *layout_safetensors({{"w", "F32", {1}}}, {}, "test"));
    ASSERT_TRUE(writer.ok());
    const std::vector<float> two = {1, 2};
    EXPECT_FALSE(writer->append(bytes_of(two)).ok());
  }  // dropped unfinished: the temporary goes
  EXPECT_FALSE(fs::exists(path("y.safetensors.tmp")));
  EXPECT_FALSE(fs::exists(path("y.safetensors")));
}

TEST_F(WriterTest, DoesNotWriteThroughASymlinkAtTheTemporaryName) {
  const std::string victim = path("victim");
  { std::ofstream(victim) << "keep"; }
  fs::create_symlink(victim, path("z.safetensors.tmp"));
  auto writer = SafetensorsWriter::create(path("z.safetensors"),
                                          *layout_safetensors({{"w", "F32", {1}}}, {}, "test"));
  EXPECT_FALSE(writer.ok());
  std::ifstream in(victim);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "keep");
}

TEST(SafetensorsLayout, RefusesBadSpecs) {
  EXPECT_FALSE(layout_safetensors({{"w", "Q4_0", {1}}}, {}, "t").ok());
  EXPECT_FALSE(layout_safetensors({{"w", "F32", {-1}}}, {}, "t").ok());
  EXPECT_FALSE(layout_safetensors({{"w", "F32", {1}}, {"w", "F32", {2}}}, {}, "t").ok());
  EXPECT_FALSE(layout_safetensors({{"__metadata__", "F32", {1}}}, {}, "t").ok());
  EXPECT_FALSE(layout_safetensors({{"w", "F64", {1ll << 40, 1ll << 40}}}, {}, "t").ok());
  // Names are JSON-escaped as serde_json does.
  auto layout = layout_safetensors({{"a\"b\n", "BOOL", {0}}}, {}, "t");
  ASSERT_TRUE(layout.ok());
  EXPECT_NE(layout->header.find(R"("a\"b\n":{"dtype":"BOOL","shape":[0],"data_offsets":[0,0]})"),
            std::string::npos);
}

// Gathers a view through `gather_strided` with a small chunk so every path is taken.
std::vector<int32_t> gather(const std::vector<int32_t>& storage, int64_t offset,
                            std::vector<int64_t> shape, std::vector<int64_t> strides,
                            size_t chunk_bytes) {
  std::vector<int32_t> out;
  auto sink = [&](std::span<const uint8_t> bytes) -> Status {
    EXPECT_LE(bytes.size() % 4, 0u);
    const size_t n = bytes.size() / 4;
    out.resize(out.size() + n);
    std::memcpy(out.data() + out.size() - n, bytes.data(), bytes.size());
    return {};
  };
  EXPECT_TRUE(gather_strided(reinterpret_cast<const uint8_t*>(storage.data() + offset), 4, shape,
                             strides, sink, chunk_bytes)
                  .ok());
  return out;
}

TEST(StridedGather, ReadsViewsInRowMajorOrder) {
  std::vector<int32_t> s(24);
  for (int i = 0; i < 24; ++i) s[static_cast<size_t>(i)] = i;
  for (size_t chunk : {size_t{4}, size_t{8}, size_t{12}, size_t{1} << 20}) {
    // Contiguous, a transpose, a column slice, a step slice, an expand, a permute, a scalar.
    EXPECT_EQ(gather(s, 0, {2, 3}, {3, 1}, chunk), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(gather(s, 0, {3, 2}, {1, 3}, chunk), (std::vector<int32_t>{0, 3, 1, 4, 2, 5}));
    EXPECT_EQ(gather(s, 2, {3, 2}, {6, 1}, chunk), (std::vector<int32_t>{2, 3, 8, 9, 14, 15}));
    EXPECT_EQ(gather(s, 1, {4}, {5}, chunk), (std::vector<int32_t>{1, 6, 11, 16}));
    EXPECT_EQ(gather(s, 7, {2, 3}, {1, 0}, chunk), (std::vector<int32_t>{7, 7, 7, 8, 8, 8}));
    EXPECT_EQ(gather(s, 0, {2, 2, 3}, {1, 12, 4}, chunk),
              (std::vector<int32_t>{0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21}));
    EXPECT_EQ(gather(s, 5, {}, {}, chunk), (std::vector<int32_t>{5}));
    EXPECT_EQ(gather(s, 5, {1, 1}, {9, 9}, chunk), (std::vector<int32_t>{5}));
    EXPECT_TRUE(gather(s, 0, {0, 3}, {3, 1}, chunk).empty());
  }
}

TEST(StridedGather, PassesSinkErrorsOn) {
  const std::vector<int32_t> s(8, 1);
  auto failing = [](std::span<const uint8_t>) -> Status { return Error{"disk full"}; };
  auto st = gather_strided(reinterpret_cast<const uint8_t*>(s.data()), 4, std::vector<int64_t>{4},
                           std::vector<int64_t>{2}, failing, 4);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "disk full");
}

}  // namespace
}  // namespace lm
