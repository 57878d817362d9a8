#include "loader/zip_archive.h"

#include <gtest/gtest.h>

#include <string>

#include "zip_builder.h"

namespace lm {
namespace {

using testing::make_zip;
using testing::ZipEntrySpec;
using testing::ZipOptions;

std::string text(std::span<const uint8_t> bytes) { return {bytes.begin(), bytes.end()}; }

std::string parse_error(const std::vector<uint8_t>& bytes) {
  auto r = ZipArchive::parse(bytes, "test.zip");
  if (r.ok()) return "";
  EXPECT_EQ(r.error().message.rfind("test.zip: ", 0), 0u) << r.error().message;
  return r.error().message;
}

const std::vector<ZipEntrySpec> kEntries = {
    {"archive/data.pkl", "pickle bytes"},
    {"archive/data/0", std::string(64, '\x01')},
    {"archive/empty", ""},
};

TEST(ZipArchive, ReadsStoredEntriesInEveryLayout) {
  const ZipOptions layouts[] = {
      {},
      {.zip64 = true},
      {.data_descriptor = true},
      {.zip64 = true, .data_descriptor = true, .local_padding = 40},  // torch.save's
  };
  for (const ZipOptions& options : layouts) {
    const auto bytes = make_zip(kEntries, options);  // the archive views these bytes
    auto zip = ZipArchive::parse(bytes, "test.zip");
    ASSERT_TRUE(zip.ok()) << zip.error().message;
    ASSERT_EQ(zip->entries().size(), 3u);
    EXPECT_EQ(text(*zip->find("archive/data.pkl")), "pickle bytes");
    EXPECT_EQ(text(*zip->find("archive/data/0")), std::string(64, '\x01'));
    EXPECT_TRUE(zip->find("archive/empty")->empty());
    EXPECT_FALSE(zip->find("archive/missing").has_value());
  }
}

TEST(ZipArchive, ReadsWhatTorchSaveWrote) {
  auto zip = ZipArchive::open(std::string(LM_REPO_ROOT) +
                              "/tests/fixtures/torch_bin/tied/pytorch_model.bin");
  ASSERT_TRUE(zip.ok()) << zip.error().message;
  EXPECT_TRUE(zip->find("pytorch_model/data.pkl").has_value());
  EXPECT_EQ(text(*zip->find("pytorch_model/byteorder")), "little");
  // Storage entries are aligned to 64 bytes by local-header padding.
  const auto storage = zip->find("pytorch_model/data/0");
  ASSERT_TRUE(storage.has_value());
  EXPECT_EQ(storage->size(), 8u * 4 * 4);
}

TEST(ZipArchive, EmptyArchiveIsValid) {
  const auto bytes = make_zip({});
  auto zip = ZipArchive::parse(bytes, "test.zip");
  ASSERT_TRUE(zip.ok()) << zip.error().message;
  EXPECT_TRUE(zip->entries().empty());
}

TEST(ZipArchive, RefusesCompressedEntries) {
  auto bytes = make_zip({{"a/data.pkl", "x"}, {"a/data/0", "deflated?", 8}});
  EXPECT_NE(parse_error(bytes).find("entry 'a/data/0': compressed with method 8"),
            std::string::npos);
  // A local header that disagrees with the central directory about the method is refused too.
  bytes = make_zip({{"a/data.pkl", "x"}});
  bytes[8] = 8;  // local header method
  EXPECT_NE(parse_error(bytes).find("compressed with method 8"), std::string::npos);
}

TEST(ZipArchive, RefusesDuplicateAndOverlappingEntries) {
  EXPECT_NE(parse_error(make_zip({{"a", "1"}, {"a", "2"}})).find("duplicate entry 'a'"),
            std::string::npos);
  // Point the second central entry at the first local header: two names for the same bytes.
  auto bytes = make_zip({{"a", "1"}, {"b", "2"}});
  const size_t second_local = 30 + 1 + 1;
  const size_t dir = 2 * second_local;
  const size_t second_central = dir + 46 + 1;
  ASSERT_EQ(bytes[second_central], 'P');
  bytes[second_central + 42] = 0;  // local header offset of "b" -> 0
  EXPECT_NE(parse_error(bytes).find("overlaps"), std::string::npos);
}

TEST(ZipArchive, RefusesOffsetsOutsideTheFile) {
  auto bytes = make_zip({{"a", "1234"}});
  const size_t central = 30 + 1 + 4;
  // Size claims more bytes than lie before the central directory.
  bytes[central + 20] = 200;
  bytes[central + 24] = 200;
  EXPECT_NE(parse_error(bytes).find("runs into the central directory"), std::string::npos);
  bytes = make_zip({{"a", "1234"}});
  bytes[central + 42] = 0xf0;  // local header offset far past the end
  EXPECT_NE(parse_error(bytes), "");
  // A central directory offset past its end record.
  bytes = make_zip({{"a", "1234"}});
  bytes[bytes.size() - 6] = 0xff;
  EXPECT_NE(parse_error(bytes), "");
}

TEST(ZipArchive, RefusesStoredEntryWithDifferentCompressedSize) {
  auto bytes = make_zip({{"a", "1234"}});
  bytes[30 + 1 + 4 + 20] = 3;  // central compressed size
  EXPECT_NE(parse_error(bytes).find("compressed size 3"), std::string::npos);
}

TEST(ZipArchive, RefusesEveryTruncation) {
  for (const ZipOptions& options :
       {ZipOptions{}, ZipOptions{.zip64 = true, .data_descriptor = true, .local_padding = 8}}) {
    const auto bytes = make_zip(kEntries, options);
    for (size_t n = 0; n < bytes.size(); ++n) {
      std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      EXPECT_NE(parse_error(cut), "") << "prefix of " << n << " bytes parsed";
    }
  }
}

TEST(ZipArchive, SurvivesEverySingleByteCorruption) {
  // Every byte flipped must give an archive whose spans still lie inside the file, or an error.
  const auto bytes = make_zip(kEntries, {.zip64 = true, .data_descriptor = true});
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      auto corrupt = bytes;
      corrupt[i] ^= mask;
      auto zip = ZipArchive::parse(corrupt, "test.zip");
      if (!zip.ok()) continue;
      for (const auto& [name, span] : zip->entries()) {
        EXPECT_GE(span.data(), corrupt.data());
        EXPECT_LE(span.data() + span.size(), corrupt.data() + corrupt.size());
      }
    }
  }
}

TEST(ZipArchive, RefusesNonZipFiles) {
  EXPECT_NE(parse_error(std::vector<uint8_t>(100, 'x')).find("no zip end-of-central-directory"),
            std::string::npos);
  EXPECT_NE(parse_error({}).find("too short"), std::string::npos);
  EXPECT_FALSE(ZipArchive::open("/nonexistent/file.zip").ok());
}

}  // namespace
}  // namespace lm
