// The GGUF file a repository is served from, as llama.cpp's -hf / --hf-file pick it, on listings
// shaped like real GGUF repositories (bartowski's and unsloth's layouts).
#include "hub/gguf_choice.h"

#include <gtest/gtest.h>

namespace lm::hub {
namespace {

using Names = std::vector<std::string>;

// bartowski/...-GGUF: one file per quant, a split Q8_0, an imatrix and a projector beside them.
const Names kRepo = {
    ".gitattributes",
    "README.md",
    "Model-7B-Q8_0-00002-of-00002.gguf",
    "Model-7B-Q8_0-00001-of-00002.gguf",
    "Model-7B-Q4_K_M.gguf",
    "Model-7B-Q4_K_S.gguf",
    "Model-7B-IQ4_XS.gguf",
    "Model-7B.imatrix.gguf",
    "mmproj-Model-7B-f16.gguf",
};

Result<Names> choose(const Names& files, std::optional<std::string> file,
                     std::optional<std::string> quant) {
  return choose_gguf_files(files, GgufRequest{std::move(file), std::move(quant)}, "org/Model-GGUF");
}

TEST(GgufChoice, QuantTagSplitsOffTheModelId) {
  EXPECT_EQ(split_quant_tag("org/Model-GGUF:Q4_K_M"),
            (std::pair<std::string, std::optional<std::string>>{"org/Model-GGUF", "Q4_K_M"}));
  EXPECT_EQ(split_quant_tag("org/Model-GGUF").second, std::nullopt);
  EXPECT_EQ(split_quant_tag("org/Model-GGUF:").second, std::nullopt);
}

TEST(GgufChoice, TheQuantTagPicksItsFileCaseInsensitively) {
  EXPECT_EQ(*choose(kRepo, std::nullopt, "q4_k_s"), Names{"Model-7B-Q4_K_S.gguf"});
  EXPECT_EQ(*choose(kRepo, std::nullopt, "IQ4_XS"), Names{"Model-7B-IQ4_XS.gguf"});
  // Q4_K matches neither Q4_K_M nor Q4_K_S: the tag must end at '.' or '-'.
  auto none = choose(kRepo, std::nullopt, "Q4_K");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no GGUF file of org/Model-GGUF matches the quant Q4_K"),
            std::string::npos);
  EXPECT_NE(none.error().message.find("Model-7B-Q4_K_M.gguf, Model-7B-Q4_K_S.gguf"),
            std::string::npos)
      << none.error().message;
}

TEST(GgufChoice, ASplitQuantBringsAllItsShardsFirstShardFirst) {
  EXPECT_EQ(*choose(kRepo, std::nullopt, "Q8_0"),
            (Names{"Model-7B-Q8_0-00001-of-00002.gguf", "Model-7B-Q8_0-00002-of-00002.gguf"}));
}

TEST(GgufChoice, WithoutATagQ4KMThenQ8_0ThenTheFirstModelFile) {
  EXPECT_EQ(*choose(kRepo, std::nullopt, std::nullopt), Names{"Model-7B-Q4_K_M.gguf"});
  EXPECT_EQ(*choose({"a-Q8_0.gguf", "b-F16.gguf"}, std::nullopt, std::nullopt),
            Names{"a-Q8_0.gguf"});
  EXPECT_EQ(*choose({"mmproj-f16.gguf", "z-F16.gguf", "b-BF16.gguf"}, std::nullopt, std::nullopt),
            Names{"b-BF16.gguf"});
}

TEST(GgufChoice, TheNamedFileWinsOverTheTag) {
  EXPECT_EQ(*choose(kRepo, "model-7b-iq4_xs.gguf", "Q4_K_M"), Names{"Model-7B-IQ4_XS.gguf"});
  auto missing = choose(kRepo, "Model-7B-Q2_K.gguf", std::nullopt);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("--gguf-file Model-7B-Q2_K.gguf: no such file in "
                                         "org/Model-GGUF (its GGUF files: "),
            std::string::npos)
      << missing.error().message;
  auto later = choose(kRepo, "Model-7B-Q8_0-00002-of-00002.gguf", std::nullopt);
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.error().message.find("name the first shard, Model-7B-Q8_0-00001-of-00002.gguf"),
            std::string::npos)
      << later.error().message;
}

TEST(GgufChoice, MoreThanOneMatchIsRefused) {
  auto r = choose({"a/Model-Q4_K_M.gguf", "b/Model-Q4_K_M.gguf"}, std::nullopt, "Q4_K_M");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("more than one GGUF file of org/Model-GGUF matches the quant "
                                   "Q4_K_M: a/Model-Q4_K_M.gguf, b/Model-Q4_K_M.gguf"),
            std::string::npos)
      << r.error().message;
}

TEST(GgufChoice, AMissingShardIsNamed) {
  auto r = choose({"m-Q8_0-00001-of-00003.gguf", "m-Q8_0-00003-of-00003.gguf"}, std::nullopt,
                  std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("org/Model-GGUF lacks m-Q8_0-00002-of-00003.gguf, shard 2 of 3"),
            std::string::npos)
      << r.error().message;
}

TEST(GgufChoice, NoModelFileIsRefused) {
  auto r = choose({"mmproj-f16.gguf", "config.json"}, std::nullopt, std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "org/Model-GGUF has no GGUF model file (its GGUF files: mmproj-f16.gguf)");
}

TEST(GgufChoice, SafetensorsWinUnlessAGgufIsAskedFor) {
  const Names both = {"model.safetensors", "config.json", "model-Q4_K_M.gguf"};
  EXPECT_FALSE(serves_gguf(both, {}));
  EXPECT_TRUE(serves_gguf(both, {std::nullopt, "Q4_K_M"}));
  EXPECT_TRUE(serves_gguf(both, {"model-Q4_K_M.gguf", std::nullopt}));
  EXPECT_TRUE(serves_gguf({"README.md", "model-Q4_K_M.gguf"}, {}));
  EXPECT_FALSE(serves_gguf({"README.md", "mmproj-f16.gguf"}, {}));
}

}  // namespace
}  // namespace lm::hub
