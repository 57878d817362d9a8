#include "loader/gguf_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "test_files.h"

namespace lm {
namespace {

using testing::Bytes;
using testing::TempFile;

constexpr uint32_t kString = 8, kArray = 9, kU32 = 4, kF32 = 6;

// A valid two-tensor GGUF v3: metadata (architecture, alignment, a string array) and an F32
// [2, 4] tensor plus a Q8_0 [1, 32] tensor.
struct GgufSpec {
  uint32_t version = 3;
  uint64_t num_tensors = 2;
  uint64_t num_kv = 3;
  uint64_t tokens_count = 2;
  uint64_t dim0 = 4;
  uint32_t tensor_type = 0;
  uint64_t second_offset = 32;
  std::string second_name = "b";
  bool truncate_data = false;
};

std::vector<uint8_t> make_gguf(const GgufSpec& s) {
  Bytes b;
  b.put<uint32_t>(0x46554747)
      .put<uint32_t>(s.version)
      .put<uint64_t>(s.num_tensors)
      .put<uint64_t>(s.num_kv);
  b.str("general.architecture").put<uint32_t>(kString).str("llama");
  b.str("general.alignment").put<uint32_t>(kU32).put<uint32_t>(32);
  b.str("tokenizer.ggml.tokens")
      .put<uint32_t>(kArray)
      .put<uint32_t>(kString)
      .put<uint64_t>(s.tokens_count);
  b.str("a").str("b");
  b.str("a")
      .put<uint32_t>(2)
      .put<uint64_t>(s.dim0)
      .put<uint64_t>(2)
      .put<uint32_t>(s.tensor_type)
      .put<uint64_t>(0);
  b.str(s.second_name)
      .put<uint32_t>(2)
      .put<uint64_t>(32)
      .put<uint64_t>(1)
      .put<uint32_t>(8)
      .put<uint64_t>(s.second_offset);
  b.pad_to(32);
  for (int i = 0; i < 8; ++i) b.put<float>(static_cast<float>(i));
  for (int i = 0; i < 34; ++i) b.put<uint8_t>(1);
  if (s.truncate_data) b.data.resize(b.data.size() - 10);
  return b.data;
}

std::string open_error(const std::vector<uint8_t>& bytes) {
  TempFile f(bytes, ".gguf");
  auto r = GgufFile::open(f.path());
  if (r.ok()) return "";
  EXPECT_NE(r.error().message.find(f.path()), std::string::npos) << "error must name the file";
  return r.error().message;
}

// The in-memory entry point (tests, fuzzing) reads exactly what open() reads, with views into
// the caller's bytes and its label in errors.
TEST(GgufFile, ParsesCallerOwnedBytes) {
  const std::vector<uint8_t> bytes = make_gguf({});
  auto gguf = GgufFile::parse(bytes, "in-memory.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  EXPECT_EQ(gguf->path(), "in-memory.gguf");
  const GgufTensorInfo* a = gguf->find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(gguf->tensor(*a).data, bytes.data() + a->offset);
  EXPECT_EQ(gguf->tensor(*a).as<float>()[7], 7.0f);
  gguf->drop_pages(bytes.data(), bytes.size());  // no mapping: nothing to drop, no failure
  GgufSpec truncated;
  truncated.truncate_data = true;
  auto bad = GgufFile::parse(make_gguf(truncated), "in-memory.gguf");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("in-memory.gguf: ", 0), 0u) << bad.error().message;
}

TEST(GgufFile, ReadsValidFile) {
  TempFile f(make_gguf({}), ".gguf");
  auto gguf = GgufFile::open(f.path());
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  EXPECT_EQ(gguf->version(), 3u);
  EXPECT_EQ(**gguf->get_string("general.architecture"), "llama");
  EXPECT_EQ(*gguf->get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"a", "b"}));
  const GgufTensorInfo* a = gguf->find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (Shape{2, 4}));
  EXPECT_EQ(a->dtype, DType::kF32);
  Tensor t = gguf->tensor(*a);
  EXPECT_EQ(t.as<float>()[5], 5.0f);
  const GgufTensorInfo* b = gguf->find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kQ8_0);
  EXPECT_EQ(b->num_bytes, 34u);
  // Wrong-type access is an error, absence is not.
  EXPECT_FALSE(gguf->get_int("general.architecture").ok());
  EXPECT_FALSE(gguf->get_int("missing.key")->has_value());
}

TEST(GgufFile, RejectsHostileFiles) {
  EXPECT_NE(open_error({}).find("bad magic"), std::string::npos);
  EXPECT_NE(open_error({'G', 'G', 'U', 'F'}).find("truncated"), std::string::npos);
  EXPECT_NE(open_error(make_gguf({.version = 7})).find("unsupported GGUF version 7"),
            std::string::npos);
  EXPECT_NE(open_error(make_gguf({.num_tensors = 1ull << 40})).find("absurd tensor count"),
            std::string::npos);
  EXPECT_NE(open_error(make_gguf({.num_kv = 1ull << 50})).find("absurd metadata count"),
            std::string::npos);
  EXPECT_NE(open_error(make_gguf({.tokens_count = 1ull << 60})).find("exceeds the file"),
            std::string::npos);
  EXPECT_NE(open_error(make_gguf({.dim0 = 0})).find("invalid dimension"), std::string::npos);
  EXPECT_NE(open_error(make_gguf({.dim0 = 1ull << 62})).find("invalid dimension"),
            std::string::npos);
  EXPECT_NE(open_error(make_gguf({.tensor_type = 99})).find("unsupported tensor type 99"),
            std::string::npos);
  EXPECT_NE(open_error(make_gguf({.second_offset = 1ull << 40})).find("past the end"),
            std::string::npos);
  EXPECT_NE(open_error(make_gguf({.second_offset = 0})).find("overlap"), std::string::npos);
  EXPECT_NE(open_error(make_gguf({.second_offset = 7})).find("not aligned"), std::string::npos);
  EXPECT_NE(open_error(make_gguf({.second_name = "a"})).find("duplicate tensor 'a'"),
            std::string::npos);
  EXPECT_NE(open_error(make_gguf({.truncate_data = true})).find("past the end"), std::string::npos);
  // Every truncation point of a valid file fails cleanly (no crash, no out-of-bounds read).
  const auto full = make_gguf({});
  for (size_t len = 0; len + 10 < full.size(); len += 3) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(len));
    EXPECT_FALSE(open_error(cut).empty()) << len;
  }
}

TEST(GgufFile, RejectsBadMetadataValues) {
  Bytes b;
  b.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1);
  b.str("x").put<uint32_t>(77);
  EXPECT_NE(open_error(b.data).find("unknown metadata value type 77"), std::string::npos);
  Bytes c;
  c.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1);
  c.str("x").put<uint32_t>(kString).put<uint64_t>(1ull << 62);
  EXPECT_NE(open_error(c.data).find("truncated"), std::string::npos);
  Bytes d;
  d.put<uint32_t>(0x46554747).put<uint32_t>(2).put<uint64_t>(0).put<uint64_t>(2);
  d.str("x").put<uint32_t>(kF32).put<float>(1.0f).str("x").put<uint32_t>(kF32).put<float>(2.0f);
  EXPECT_NE(open_error(d.data).find("duplicate metadata key 'x'"), std::string::npos);
}

}  // namespace
}  // namespace lm
