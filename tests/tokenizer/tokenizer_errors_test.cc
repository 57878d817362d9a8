// Malformed tokenizer.json / GGUF vocabularies give errors that name the problem.
#include <gtest/gtest.h>

#include "tiny_vocab.h"

namespace lm {
namespace {

using namespace testing_tok;

std::string error_of(const std::string& text) {
  auto tok = Tokenizer::from_json_strings(text, "");
  EXPECT_FALSE(tok.ok());
  return tok.ok() ? "" : tok.error().message;
}
std::string error_of(const Json& j) { return error_of(j.dump()); }

TEST(TokenizerJsonErrors, NotJson) {
  EXPECT_NE(error_of(std::string("{\"model\": ")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(std::string("[1, 2]")).find("JSON object"), std::string::npos);
}

TEST(TokenizerJsonErrors, UnknownModelTypeIsNamed) {
  Json j = bpe_json({"a"}, {});
  j["model"]["type"] = "WordPiece";
  const std::string e = error_of(j);
  EXPECT_NE(e.find("'WordPiece'"), std::string::npos) << e;
}

TEST(TokenizerJsonErrors, MissingModelOrVocab) {
  Json j = bpe_json({"a"}, {});
  j.erase("model");
  EXPECT_NE(error_of(j).find("no \"model\""), std::string::npos);
  Json k = bpe_json({"a"}, {});
  k["model"].erase("vocab");
  EXPECT_NE(error_of(k).find("model.vocab is missing"), std::string::npos) << error_of(k);
}

TEST(TokenizerJsonErrors, MergeWithUnknownToken) {
  const std::string e = error_of(bpe_json({"a", "b", "ab"}, {{"a", "zz"}}));
  EXPECT_NE(e.find("'zz'"), std::string::npos) << e;
  EXPECT_NE(e.find("not in the vocabulary"), std::string::npos) << e;
  const std::string e2 = error_of(bpe_json({"a", "b"}, {{"a", "b"}}));
  EXPECT_NE(e2.find("makes 'ab'"), std::string::npos) << e2;
}

// An empty Metaspace replacement made the pre-tokenizer split at offset 0 forever (found by
// reading while writing tests/fuzz/tokenizer_json_fuzz.cc): HF's replacement is one character.
TEST(TokenizerJsonErrors, EmptyMetaspaceReplacement) {
  Json j = bpe_json({"a"}, {});
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", ""}, {"prepend_scheme", "always"}};
  const std::string e = error_of(j);
  EXPECT_NE(e.find("pre_tokenizer.replacement must not be empty"), std::string::npos) << e;
}

// A catastrophically backtracking pre-tokenizer regex ran into PCRE2's match limit and failed a
// CHECK (an abort of the server on a request's text; found by reading while writing
// tests/fuzz/tokenizer_json_fuzz.cc); the unmatched rest is now one piece.
TEST(TokenizerJsonErrors, BacktrackingRegexHitsTheMatchLimitWithoutAborting) {
  Json j = bpe_json({"a", "b"}, {});
  j["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"Regex", "(a|aa)+$"}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  auto tok = load(j);
  ASSERT_NE(tok, nullptr);
  // Fibonacci(40) ways to split the a's before "$" fails at the b: past the 10^7 match limit.
  const std::string text = std::string(40, 'a') + "b";
  std::vector<int32_t> want(40, 0);
  want.push_back(1);
  EXPECT_EQ(tok->encode(text, /*add_special_tokens=*/false), want);
}

// A GGUF control token holding a lone UTF-8 lead byte matched the start of a character and cut
// the text into invalid UTF-8 for the pre-tokenizer's regex (run without UTF checks); found by
// reading while writing tests/fuzz/gguf_fuzz.cc. Such a token is now never matched in text.
TEST(TokenizerJsonErrors, GgufTokenThatIsNotUtf8NeverSplitsACharacter) {
  GgufVocab vocab;
  vocab.model = "gpt2";
  vocab.pre = "gpt-2";
  vocab.tokens = byte_alphabet();
  vocab.token_types.assign(vocab.tokens.size(), 1);
  vocab.tokens.push_back("\xE2");
  vocab.token_types.push_back(3);
  auto tok = Tokenizer::from_gguf_vocab(vocab);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const std::string text =
      "a\xE2\x80\x94"
      "b";  // "a—b"
  const std::vector<int32_t> ids = (*tok)->encode(text, /*add_special_tokens=*/false);
  EXPECT_EQ(ids, (std::vector<int32_t>{'a', 0xE2, 0x80, 0x94, 'b'}));
  EXPECT_EQ((*tok)->decode(ids, false), text);
}

TEST(TokenizerJsonErrors, WrongJsonTypes) {
  Json vocab_array = bpe_json({"a"}, {});
  vocab_array["model"]["vocab"] = Json::array({"a"});
  EXPECT_NE(error_of(vocab_array).find("model.vocab must be an object"), std::string::npos);

  Json id_string = bpe_json({"a"}, {});
  id_string["model"]["vocab"]["a"] = "0";
  EXPECT_NE(error_of(id_string).find("integer id"), std::string::npos);

  Json merge_number = bpe_json({"a"}, {});
  merge_number["model"]["merges"] = Json::array({42});
  EXPECT_NE(error_of(merge_number).find("model.merges[0]"), std::string::npos);

  Json bad_flag = bpe_json({"a"}, {});
  bad_flag["model"]["byte_fallback"] = "yes";
  EXPECT_NE(error_of(bad_flag).find("model.byte_fallback must be true or false"),
            std::string::npos);

  Json added_content = bpe_json({"a"}, {});
  added_content["added_tokens"] = Json::array({{{"id", 1}, {"content", 5}}});
  EXPECT_NE(error_of(added_content).find("added_tokens[0].content must be a string"),
            std::string::npos);
}

TEST(TokenizerJsonErrors, UnknownComponentTypesAreNamed) {
  Json pre = bpe_json({"a"}, {});
  pre["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", Json::array({{{"type", "BertPreTokenizer"}}})}};
  const std::string e = error_of(pre);
  EXPECT_NE(e.find("pre_tokenizer.pretokenizers[0]"), std::string::npos) << e;
  EXPECT_NE(e.find("'BertPreTokenizer'"), std::string::npos) << e;

  Json norm = bpe_json({"a"}, {});
  norm["normalizer"] = {{"type", "Precompiled"}};
  EXPECT_NE(error_of(norm).find("'Precompiled'"), std::string::npos);

  Json dec = bpe_json({"a"}, {});
  dec["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(error_of(dec).find("'WordPiece'"), std::string::npos);

  Json post = bpe_json({"a"}, {});
  post["post_processor"] = {{"type", "Weird"}};
  EXPECT_NE(error_of(post).find("'Weird'"), std::string::npos);
}

TEST(TokenizerJsonErrors, BadRegexAndBadIds) {
  Json re = bpe_json({"a"}, {});
  re["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(error_of(re).find("cannot compile the tokenizer regex"), std::string::npos);

  Json post = bpe_json({"a"}, {});
  post["post_processor"] = {{"type", "TemplateProcessing"},
                            {"single", Json::array({{{"SpecialToken", {{"id", "<s>"}}}}})},
                            {"special_tokens", {{"<s>", {{"ids", {999}}}}}}};
  EXPECT_NE(error_of(post).find("outside the vocabulary"), std::string::npos);
}

TEST(TokenizerJsonErrors, MissingFile) {
  auto tok = Tokenizer::from_tokenizer_json("/nonexistent/tokenizer.json", "");
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message.find("/nonexistent/tokenizer.json"), std::string::npos);
}

TEST(GgufVocabErrors, UnsupportedModelPreAndShapes) {
  GgufVocab v;
  EXPECT_FALSE(Tokenizer::from_gguf_vocab(v).ok());  // no tokens
  v.tokens = {"a", "b", "ab"};
  v.model = "bert";
  auto e = Tokenizer::from_gguf_vocab(v);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("'bert'"), std::string::npos);
  v.model = "gpt2";
  v.pre = "mystery";
  e = Tokenizer::from_gguf_vocab(v);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("'mystery'"), std::string::npos);
  v.pre = "gpt-2";
  v.merges = {"a c"};
  e = Tokenizer::from_gguf_vocab(v);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("'c'"), std::string::npos);
  v.merges = {"a b"};
  EXPECT_TRUE(Tokenizer::from_gguf_vocab(v).ok());
  v.model = "llama";
  v.scores = {0.0f};
  e = Tokenizer::from_gguf_vocab(v);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("scores"), std::string::npos);
  v.scores = {0.0f, 0.0f, 0.0f};
  v.bos_id = 7;
  e = Tokenizer::from_gguf_vocab(v);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("outside the vocabulary"), std::string::npos);
}

}  // namespace
}  // namespace lm
