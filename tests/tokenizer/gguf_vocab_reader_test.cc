// read_gguf_vocab: over hand-built metadata (a map standing in for a GGUF file's key-values),
// then over the default model's GGUF file through the loader's GgufFile.
#include "tokenizer/gguf_vocab_reader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <variant>

#include "loader/gguf_file.h"

namespace lm {
namespace {

// A GGUF file's metadata as a map; a getter of the wrong type fails, as GgufFile's do.
class FakeMetadata {
 public:
  using Value =
      std::variant<std::string, int64_t, bool, std::vector<std::string>, std::vector<double>>;
  std::map<std::string, Value> values;

  std::string path() const { return "fake.gguf"; }
  Result<std::optional<std::string>> get_string(const std::string& key) const {
    return get<std::string>(key);
  }
  Result<std::optional<int64_t>> get_int(const std::string& key) const { return get<int64_t>(key); }
  Result<std::optional<bool>> get_bool(const std::string& key) const { return get<bool>(key); }
  Result<std::vector<std::string>> get_string_array(const std::string& key) const {
    return array<std::string>(key);
  }
  Result<std::vector<double>> get_number_array(const std::string& key) const {
    return array<double>(key);
  }

 private:
  template <typename T>
  Result<std::optional<T>> get(const std::string& key) const {
    auto it = values.find(key);
    if (it == values.end()) return std::optional<T>();
    if (!std::holds_alternative<T>(it->second)) return Error{key + " has another type"};
    return std::optional<T>(std::get<T>(it->second));
  }
  template <typename T>
  Result<std::vector<T>> array(const std::string& key) const {
    LM_ASSIGN_OR_RETURN(auto value, get<std::vector<T>>(key));
    return value.value_or(std::vector<T>());
  }
};
static_assert(GgufMetadata<FakeMetadata>);
static_assert(GgufMetadata<GgufFile>);

FakeMetadata three_tokens() {
  FakeMetadata m;
  m.values["tokenizer.ggml.model"] = std::string("llama");
  m.values["tokenizer.ggml.tokens"] = std::vector<std::string>{"<unk>", "a", "b"};
  return m;
}

std::string error_of(const FakeMetadata& m) {
  auto vocab = read_gguf_vocab(m);
  return vocab.ok() ? "" : vocab.error().message;
}

TEST(GgufVocabReader, ReadsEveryField) {
  FakeMetadata m = three_tokens();
  m.values["tokenizer.ggml.pre"] = std::string("llama-bpe");
  m.values["tokenizer.ggml.scores"] = std::vector<double>{0.0, -1.5, -2.0};
  m.values["tokenizer.ggml.token_type"] = std::vector<double>{2, 1, 1};
  m.values["tokenizer.ggml.merges"] = std::vector<std::string>{"a b"};
  m.values["tokenizer.ggml.unknown_token_id"] = int64_t{0};
  m.values["tokenizer.ggml.eos_token_id"] = int64_t{2};
  m.values["tokenizer.ggml.add_bos_token"] = true;
  m.values["tokenizer.chat_template"] = std::string("{{ messages }}");
  m.values["tokenizer.chat_template.tool_use"] = std::string("{{ tools }}");
  auto vocab = read_gguf_vocab(m);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  EXPECT_EQ(vocab->model, "llama");
  EXPECT_EQ(vocab->pre, "llama-bpe");
  EXPECT_EQ(vocab->tokens, (std::vector<std::string>{"<unk>", "a", "b"}));
  EXPECT_EQ(vocab->scores, (std::vector<float>{0.0f, -1.5f, -2.0f}));
  EXPECT_EQ(vocab->token_types, (std::vector<int32_t>{2, 1, 1}));
  EXPECT_EQ(vocab->merges, (std::vector<std::string>{"a b"}));
  EXPECT_EQ(vocab->unk_id, 0);
  EXPECT_EQ(vocab->eos_id, 2);
  EXPECT_FALSE(vocab->bos_id.has_value());
  EXPECT_EQ(vocab->add_bos, true);
  EXPECT_FALSE(vocab->add_eos.has_value());
  EXPECT_EQ(vocab->chat_template, "{{ messages }}");
  EXPECT_EQ(vocab->tool_use_template, "{{ tools }}");
}

TEST(GgufVocabReader, MissingOptionalKeysTakeTheirDefaults) {
  auto vocab = read_gguf_vocab(three_tokens());
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  EXPECT_EQ(vocab->pre, "default");
  EXPECT_TRUE(vocab->scores.empty());
  EXPECT_TRUE(vocab->chat_template.empty());
  EXPECT_TRUE(vocab->tool_use_template.empty());
}

TEST(GgufVocabReader, RejectsMissingModelAndTokens) {
  FakeMetadata no_model = three_tokens();
  no_model.values.erase("tokenizer.ggml.model");
  EXPECT_EQ(error_of(no_model), "fake.gguf: no tokenizer (tokenizer.ggml.model is missing)");
  FakeMetadata no_tokens = three_tokens();
  no_tokens.values["tokenizer.ggml.tokens"] = std::vector<std::string>{};
  EXPECT_EQ(error_of(no_tokens), "fake.gguf: tokenizer.ggml.tokens is missing or empty");
}

TEST(GgufVocabReader, RejectsPerTokenArraysOfAnotherLength) {
  FakeMetadata m = three_tokens();
  m.values["tokenizer.ggml.token_type"] = std::vector<double>{1, 1};
  EXPECT_EQ(error_of(m), "fake.gguf: tokenizer.ggml.token_type has 2 entries for 3 tokens");
}

// A token type that is no int32 (a float array in a hostile GGUF) was cast to int32_t, undefined
// behaviour for NaN and values past 32 bits (found by reading while writing
// tests/fuzz/gguf_fuzz.cc, whose UBSan build would flag it).
TEST(GgufVocabReader, RejectsTokenTypesThatAreNotInt32) {
  for (double bad : {1e10, -3e9, 0.5, std::nan("")}) {
    FakeMetadata m = three_tokens();
    m.values["tokenizer.ggml.token_type"] = std::vector<double>{1, bad, 1};
    EXPECT_NE(error_of(m).find("fake.gguf: tokenizer.ggml.token_type holds"), std::string::npos)
        << bad << ": " << error_of(m);
  }
}

TEST(GgufVocabReader, RejectsIdsOutsideVocab) {
  FakeMetadata m = three_tokens();
  m.values["tokenizer.ggml.eos_token_id"] = int64_t{3};
  EXPECT_EQ(error_of(m),
            "fake.gguf: tokenizer.ggml.eos_token_id = 3 is outside the vocabulary of 3 tokens");
  m.values["tokenizer.ggml.eos_token_id"] = int64_t{-1};
  EXPECT_NE(error_of(m).find("outside the vocabulary"), std::string::npos);
}

TEST(GgufVocabReader, PassesOnTheMetadataErrors) {
  FakeMetadata m = three_tokens();
  m.values["tokenizer.ggml.add_bos_token"] = int64_t{1};
  EXPECT_EQ(error_of(m), "tokenizer.ggml.add_bos_token has another type");
}

TEST(GgufVocabReader, ReadsDefaultModelVocab) {
  auto gguf = GgufFile::open(LM_REPO_ROOT "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  auto vocab = read_gguf_vocab(*gguf);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  EXPECT_EQ(vocab->model, "gpt2");
  EXPECT_EQ(vocab->tokens.size(), 49152u);
  EXPECT_FALSE(vocab->merges.empty());
  EXPECT_TRUE(vocab->eos_id.has_value());
  EXPECT_NE(vocab->chat_template.find("im_start"), std::string::npos);
}

}  // namespace
}  // namespace lm
