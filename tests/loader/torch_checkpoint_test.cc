#include "loader/torch_checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "zip_builder.h"

namespace lm {
namespace {

namespace pk = testing::pk;
using testing::make_torch_zip;
using testing::TempFile;

const std::string kFixtures = std::string(LM_REPO_ROOT) + "/tests/fixtures/torch_bin";
constexpr const char* kMarker = "/tmp/lm_pwned";

std::string floats(int n) { return std::string(static_cast<size_t>(n) * 4, '\x01'); }

std::map<std::string, const TorchTensor*> by_name(const TorchCheckpoint& ckpt) {
  std::map<std::string, const TorchTensor*> m;
  for (const TorchTensor& t : ckpt.tensors()) m[t.name] = &t;
  return m;
}

std::string open_error(const std::vector<uint8_t>& bytes) {
  TempFile f(bytes);
  auto r = TorchCheckpoint::open(f.path());
  if (r.ok()) return "";
  EXPECT_EQ(r.error().message.rfind(f.path(), 0), 0u) << r.error().message;
  return r.error().message;
}

std::string open_error(const std::string& pickle,
                       const std::vector<std::pair<std::string, std::string>>& storages) {
  return open_error(make_torch_zip(pickle, storages));
}

TEST(TorchCheckpoint, ReadsEveryDTypeFromTorchSave) {
  auto ckpt = TorchCheckpoint::open(kFixtures + "/dtypes/pytorch_model.bin");
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
  const std::vector<std::string> expected_order = {
      "position_ids", "proj.weight",     "proj.bias",  "embed.weight", "norm.weight",
      "norm.bias",    "extra.parameter", "extra.f64",  "extra.i32",    "extra.i16",
      "extra.i8",     "extra.u8",        "extra.bool", "extra.scalar", "extra.empty"};
  ASSERT_EQ(ckpt->tensors().size(), expected_order.size());
  for (size_t i = 0; i < expected_order.size(); ++i) {
    EXPECT_EQ(ckpt->tensors()[i].name, expected_order[i]);
  }
  auto t = by_name(*ckpt);
  EXPECT_EQ(t["position_ids"]->dtype, TorchDType::kI64);
  EXPECT_EQ(t["proj.weight"]->dtype, TorchDType::kF32);
  EXPECT_EQ(t["proj.weight"]->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(t["embed.weight"]->dtype, TorchDType::kF16);
  EXPECT_EQ(t["norm.weight"]->dtype, TorchDType::kBF16);
  EXPECT_EQ(t["extra.parameter"]->shape, (std::vector<int64_t>{2, 3}));  // nn.Parameter unwrapped
  EXPECT_EQ(t["extra.f64"]->dtype, TorchDType::kF64);
  EXPECT_EQ(t["extra.bool"]->dtype, TorchDType::kBool);
  EXPECT_EQ(t["extra.u8"]->dtype, TorchDType::kU8);
  EXPECT_TRUE(t["extra.scalar"]->shape.empty());
  EXPECT_EQ(t["extra.scalar"]->num_elements(), 1);
  EXPECT_EQ(t["extra.empty"]->num_elements(), 0);
  const int8_t* i8 = reinterpret_cast<const int8_t*>(t["extra.i8"]->first_element());
  EXPECT_EQ(i8[0], -128);
  EXPECT_EQ(i8[2], 127);
}

// The in-memory entry point (tests, fuzzing): the same tensors, views into the caller's bytes.
TEST(TorchCheckpoint, ParsesCallerOwnedBytes) {
  auto file = MappedFile::open(kFixtures + "/dtypes/pytorch_model.bin");
  ASSERT_TRUE(file.ok());
  auto opened = TorchCheckpoint::open(kFixtures + "/dtypes/pytorch_model.bin");
  auto parsed = TorchCheckpoint::parse(file->bytes(), "in-memory.bin");
  ASSERT_TRUE(opened.ok() && parsed.ok());
  EXPECT_EQ(parsed->path(), "in-memory.bin");
  EXPECT_EQ(parsed->file_size(), file->size());
  ASSERT_EQ(parsed->tensors().size(), opened->tensors().size());
  for (size_t i = 0; i < parsed->tensors().size(); ++i) {
    const TorchTensor& t = parsed->tensors()[i];
    EXPECT_EQ(t.name, opened->tensors()[i].name);
    EXPECT_TRUE(t.storage.data() >= file->data() &&
                t.storage.data() + t.storage.size() <= file->data() + file->size());
  }
  const std::vector<uint8_t> not_zip = {0x80, 0x02, '.'};
  auto legacy = TorchCheckpoint::parse(not_zip, "in-memory.bin");
  ASSERT_FALSE(legacy.ok());
  EXPECT_EQ(legacy.error().message.rfind("in-memory.bin: ", 0), 0u);
}

TEST(TorchCheckpoint, ReadsSharedAndStridedViews) {
  auto ckpt = TorchCheckpoint::open(kFixtures + "/views/pytorch_model.bin");
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
  auto t = by_name(*ckpt);
  EXPECT_EQ(t["shared.a"]->storage_key, t["shared.b"]->storage_key);
  EXPECT_EQ(t["shared.a"]->storage_key, t["transposed"]->storage_key);
  EXPECT_TRUE(t["shared.a"]->is_contiguous());
  EXPECT_EQ(t["transposed"]->strides, (std::vector<int64_t>{1, 6}));
  EXPECT_FALSE(t["transposed"]->is_contiguous());
  EXPECT_EQ(t["rows"]->storage_offset, 24);
  EXPECT_TRUE(t["rows"]->is_contiguous());
  EXPECT_EQ(t["rows"]->storage.size(), 80u * 4);
  EXPECT_EQ(t["expanded"]->strides, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(t["steps"]->strides, (std::vector<int64_t>{2}));
  EXPECT_EQ(t["permuted"]->dtype, TorchDType::kBF16);
}

TEST(TorchCheckpoint, RefusesPicklesThatWouldRunCode) {
  std::filesystem::remove(kMarker);
  const std::pair<const char*, const char*> cases[] = {
      {"os_system.bin", "refusing global 'posix.system'"},
      {"builtins_eval.bin", "refusing global '__builtin__.eval'"},
      {"unknown_global.bin", "refusing global '__main__.UnknownGlobal'"},
  };
  for (const auto& [file, message] : cases) {
    auto ckpt = TorchCheckpoint::open(kFixtures + "/malicious/" + file);
    ASSERT_FALSE(ckpt.ok()) << file;
    EXPECT_NE(ckpt.error().message.find(message), std::string::npos) << ckpt.error().message;
  }
  EXPECT_FALSE(std::filesystem::exists(kMarker));
}

TEST(TorchCheckpoint, ReadsAHandBuiltArchiveWithAnyFolderName) {
  const std::string pickle = pk::state_dict({{"w", pk::tensor("7", 6, 1, {2, 2}, {1, 2})}});
  TempFile f(make_torch_zip(pickle, {{"7", floats(6)}}, "little", "some_other_stem"));
  auto ckpt = TorchCheckpoint::open(f.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
  ASSERT_EQ(ckpt->tensors().size(), 1u);
  EXPECT_EQ(ckpt->tensors()[0].storage_key, "7");
  EXPECT_EQ(ckpt->tensors()[0].storage_offset, 1);
  // No byteorder entry (torch < 1.10) means little-endian.
  TempFile old(make_torch_zip(pickle, {{"7", floats(6)}}, ""));
  EXPECT_TRUE(TorchCheckpoint::open(old.path()).ok());
}

TEST(TorchCheckpoint, UnwrapsATrainingCheckpointStateDict) {
  const std::string inner = pk::ordered_dict() + pk::kMark + pk::str("w") +
                            pk::tensor("0", 2, 0, {2}, {1}) + pk::kSetItems;
  const std::string pickle = pk::proto() + "}" + pk::kMark + pk::str("epoch") + pk::int1(3) +
                             pk::str("state_dict") + inner + pk::kSetItems + pk::kStop;
  TempFile f(make_torch_zip(pickle, {{"0", floats(2)}}));
  auto ckpt = TorchCheckpoint::open(f.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().message;
  ASSERT_EQ(ckpt->tensors().size(), 1u);
  EXPECT_EQ(ckpt->tensors()[0].name, "w");
}

TEST(TorchCheckpoint, RefusesOtherFormats) {
  // The legacy format is a bare pickle stream that starts with torch's magic number.
  const std::string legacy = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.";
  EXPECT_NE(open_error(std::vector<uint8_t>(legacy.begin(), legacy.end()))
                .find("legacy (pre-1.6) torch.save format is not supported; re-save with "
                      "torch>=1.6"),
            std::string::npos);
  EXPECT_NE(open_error(std::vector<uint8_t>(64, 'x')).find("not a PyTorch checkpoint"),
            std::string::npos);
  EXPECT_NE(open_error(std::vector<uint8_t>{}).find("not a PyTorch checkpoint"), std::string::npos);
  const std::string pickle = pk::state_dict({{"w", pk::tensor("0", 2, 0, {2}, {1})}});
  EXPECT_NE(open_error(make_torch_zip(pickle, {{"0", floats(2)}}, "big")).find("big-endian"),
            std::string::npos);
  EXPECT_NE(open_error(make_torch_zip(pickle, {{"0", floats(2)}}, "middle")).find("byte order"),
            std::string::npos);
  EXPECT_NE(open_error(testing::make_zip({{"a/other", "x"}})).find("without <archive>/data.pkl"),
            std::string::npos);
  EXPECT_NE(open_error(testing::make_zip({{"a/data.pkl", pickle}, {"b/data.pkl", pickle}}))
                .find("several data.pkl"),
            std::string::npos);
}

TEST(TorchCheckpoint, ChecksViewsAgainstTheirStorage) {
  // Storage bytes must match the declared element count.
  EXPECT_NE(open_error(pk::state_dict({{"w", pk::tensor("0", 4, 0, {4}, {1})}}), {{"0", floats(3)}})
                .find("holds 12 bytes but 4 elements of F32 need 16"),
            std::string::npos);
  EXPECT_NE(open_error(pk::state_dict({{"w", pk::tensor("0", 4, 0, {4}, {1})}}), {})
                .find("storage entry 'archive/data/0' is missing"),
            std::string::npos);
  // Views reading past the end: by offset, by size, by stride.
  for (const std::string& tensor :
       {pk::tensor("0", 4, 1, {4}, {1}), pk::tensor("0", 4, 0, {5}, {1}),
        pk::tensor("0", 4, 0, {2, 2}, {3, 1}), pk::tensor("0", 4, 0, {2}, {0x7fffffff})}) {
    EXPECT_NE(open_error(pk::state_dict({{"w", tensor}}), {{"0", floats(4)}})
                  .find("reads past its storage of 4 elements"),
              std::string::npos);
  }
  // An empty view may sit at the very end of its storage, not past it.
  EXPECT_EQ(
      open_error(pk::state_dict({{"w", pk::tensor("0", 4, 4, {0}, {1})}}), {{"0", floats(4)}}), "");
  EXPECT_NE(
      open_error(pk::state_dict({{"w", pk::tensor("0", 4, 5, {0}, {1})}}), {{"0", floats(4)}}), "");
  EXPECT_NE(
      open_error(pk::state_dict({{"w", pk::tensor("0", 4, -1, {1}, {1})}}), {{"0", floats(4)}})
          .find("storage offset"),
      std::string::npos);
  EXPECT_NE(
      open_error(pk::state_dict({{"w", pk::tensor("0", 4, 0, {2, 2}, {1})}}), {{"0", floats(4)}})
          .find("size has 2 dims but stride has 1"),
      std::string::npos);
  EXPECT_NE(
      open_error(pk::state_dict({{"w", pk::tensor("0", 4, 0, {-2}, {1})}}), {{"0", floats(4)}})
          .find("non-negative"),
      std::string::npos);
  // One storage key cannot be two types.
  EXPECT_NE(open_error(pk::state_dict({{"a", pk::tensor("0", 4, 0, {4}, {1})},
                                       {"b", pk::tensor("0", 8, 0, {8}, {1}, "HalfStorage")}}),
                       {{"0", floats(4)}})
                .find("two different types or sizes"),
            std::string::npos);
  EXPECT_NE(
      open_error(pk::state_dict({{"w", pk::tensor("0", 4, 0, {4}, {1}, "ComplexFloatStorage")}}),
                 {{"0", floats(4)}})
          .find("refusing global 'torch.ComplexFloatStorage'"),
      std::string::npos);
}

TEST(TorchCheckpoint, RefusesWhatIsNotATensorStateDict) {
  EXPECT_NE(open_error(pk::proto() + "]" + pk::kStop, {}).find("is a list, not a state dict"),
            std::string::npos);
  EXPECT_NE(open_error(pk::state_dict({{"w", pk::int1(3)}}), {})
                .find("tensor 'w': value is an int, not a tensor"),
            std::string::npos);
  EXPECT_NE(open_error(pk::state_dict({{"w", pk::tensor("0", 1, 0, {1}, {1})},
                                       {"w", pk::tensor("0", 1, 0, {1}, {1})}}),
                       {{"0", floats(1)}})
                .find("duplicate tensor name 'w'"),
            std::string::npos);
  const std::string int_key =
      pk::proto() + "}" + pk::int1(1) + pk::tensor("0", 1, 0, {1}, {1}) + "s" + pk::kStop;
  EXPECT_NE(open_error(int_key, {{"0", floats(1)}}).find("key is an int"), std::string::npos);
}

TEST(TorchCheckpoint, SurvivesCorruptPickles) {
  // Flip every byte of a valid pickle: each result must be an error or views inside storages.
  const std::string pickle =
      pk::state_dict({{"w", pk::tensor("0", 6, 1, {2, 2}, {1, 2})},
                      {"v", pk::tensor("1", 4, 0, {4}, {1}, "HalfStorage")}});
  for (size_t i = 0; i < pickle.size(); ++i) {
    std::string corrupt = pickle;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
    TempFile f(make_torch_zip(corrupt, {{"0", floats(6)}, {"1", std::string(8, '\0')}}));
    auto ckpt = TorchCheckpoint::open(f.path());
    if (!ckpt.ok()) continue;
    for (const TorchTensor& t : ckpt->tensors()) {
      if (t.num_elements() == 0) continue;
      int64_t last = t.storage_offset;
      for (size_t k = 0; k < t.shape.size(); ++k) last += (t.shape[k] - 1) * t.strides[k];
      const int64_t elem = torch_dtype_info(t.dtype).element_bytes;
      EXPECT_LE(static_cast<uint64_t>((last + 1) * elem), t.storage.size()) << t.name;
    }
  }
}

}  // namespace
}  // namespace lm
