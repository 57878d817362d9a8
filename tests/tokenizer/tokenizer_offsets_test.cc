// Tokenizer::offsets where the corpus test's three tokenizers do not reach: llama-spm's
// tokenizer.json made to put SentencePiece's dummy prefix as Mistral and non-legacy Llama files do
// (a Metaspace pre-tokenizer, "first" or "always", no Prepend normalizer), and given Phi-3-style
// added tokens that take the whitespace beside them (rstrip, lstrip). Ids and byte offsets against
// HF tokenizers (tests/fixtures/tokenizer/offsets_variants.json, made by
// scripts/fixtures/make_tokenize_offsets_references.py with the same patches).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/text_file.h"
#include "tokenizer/tokenizer.h"

namespace lm {
namespace {

using Json = nlohmann::json;

Json read_json(const std::string& path) {
  auto text = read_text_file(path);
  EXPECT_TRUE(text.ok()) << text.error().message << " (run `make fixtures-test`)";
  return text.ok() ? Json::parse(*text) : Json();
}

// The script's variant_file: the patch's keys replace the base's, its added tokens are appended
// with ids after the model's vocabulary.
Json patched(Json base, const Json& patch) {
  for (const auto& [key, value] : patch.items()) {
    if (key != "added_tokens") {
      base[key] = value;
      continue;
    }
    const size_t size = base["model"]["vocab"].size();
    for (size_t i = 0; i < value.size(); ++i) {
      Json token = value[i];
      token["id"] = size + i;
      base["added_tokens"].push_back(token);
    }
  }
  return base;
}

TEST(TokenizerOffsets, DummyPrefixSchemesAndStrippingAddedTokensMatchHf) {
  const std::string dir = std::string(LM_BUILD_ROOT) + "/test-models/tokenizers/llama-spm";
  const Json base = read_json(dir + "/tokenizer.json");
  const auto config = read_text_file(dir + "/tokenizer_config.json");
  ASSERT_TRUE(config.ok());
  const Json variants =
      read_json(std::string(LM_REPO_ROOT) + "/tests/fixtures/tokenizer/offsets_variants.json");
  ASSERT_EQ(variants.size(), 3u);
  for (const auto& [name, variant] : variants.items()) {
    SCOPED_TRACE(name);
    auto tokenizer = Tokenizer::from_json_strings(patched(base, variant["patch"]).dump(), *config);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    for (const Json& c : variant["cases"]) {
      const std::string text = c["text"].get<std::string>();
      SCOPED_TRACE(testing::PrintToString(text));
      const std::vector<int32_t> ids = (*tokenizer)->encode(text, true);
      ASSERT_EQ(ids, c["ids"].get<std::vector<int32_t>>());
      std::vector<size_t> flat;
      for (const Tokenizer::TextRange& r : (*tokenizer)->offsets(text, ids, true)) {
        flat.push_back(r.begin);
        flat.push_back(r.end);
      }
      EXPECT_EQ(flat, c["offsets"].get<std::vector<size_t>>());
    }
  }
}

}  // namespace
}  // namespace lm
