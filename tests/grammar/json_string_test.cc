// The strings a JSON schema's grammar admits, as patched in scripts/patches/xgrammar-0.2.8/: a
// length-bounded string has no raw control character (JSON forbids them), and the built-in formats
// admit no value their validators refuse (exact calendar dates, leap seconds only at 23:59:60 UTC,
// IPv4 octets without leading zeros) and no text that is not JSON.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gguf_test_tokenizer.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_vocab.h"

namespace lm {
namespace {

class JsonStringGrammar : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = load_gguf_tokenizer("models/SmolLM2-135M-Instruct.Q4_1.gguf").release();
    ASSERT_NE(tokenizer_, nullptr);
    vocab_ =
        new GrammarVocab(*tokenizer_, tokenizer_->vocab_size(), {id_of(*tokenizer_, "<|im_end|>")});
    compiler_ = new GrammarCompiler(*vocab_);
  }
  static void TearDownTestSuite() {
    delete compiler_;
    delete vocab_;
    delete tokenizer_;
  }

  // Whether the grammar of `schema` takes `json` (SmolLM2's tokens for it, one by one) as a whole
  // document.
  static bool accepts(const std::string& schema, const std::string& json) {
    auto grammar = compiler_->compile({GrammarKind::kJsonSchema, schema});
    EXPECT_TRUE(grammar.ok()) << schema << ": " << grammar.error().message;
    if (!grammar.ok()) return false;
    GrammarMatcher matcher(*grammar);
    for (int32_t id : tokenizer_->encode(json, /*add_special_tokens=*/false)) {
      if (!matcher.accept_token(id)) return false;
    }
    return matcher.can_terminate();
  }
  static std::string quoted(const std::string& text) { return "\"" + text + "\""; }

  static Tokenizer* tokenizer_;
  static GrammarVocab* vocab_;
  static GrammarCompiler* compiler_;
};
Tokenizer* JsonStringGrammar::tokenizer_ = nullptr;
GrammarVocab* JsonStringGrammar::vocab_ = nullptr;
GrammarCompiler* JsonStringGrammar::compiler_ = nullptr;

TEST_F(JsonStringGrammar, BoundedStringHasNoRawControlCharacters) {
  const std::string schema = R"({"type":"string","minLength":1,"maxLength":4})";
  EXPECT_TRUE(accepts(schema, R"("ab c")"));
  EXPECT_TRUE(accepts(schema, "\"\u00e9\u00e9\u00e9\u00e9\""));  // characters, not bytes
  EXPECT_FALSE(accepts(schema, R"("abcde")"));
  EXPECT_FALSE(accepts(schema, R"("")"));
  // JSON forbids raw control characters in a string (the suite saw a raw tab).
  EXPECT_FALSE(accepts(schema, "\"a\tb\""));
  EXPECT_FALSE(accepts(schema, "\"a\nb\""));
  EXPECT_FALSE(accepts(schema, std::string("\"a\x01") + "b\""));
  EXPECT_FALSE(accepts(schema, std::string("\"a\x1f") + "b\""));
  // NOTE: nor escapes, as before the patch: stricter than JSON (never invalid), and admitting
  // them would make the repetition a rule expanded at every token (see the patch).
  EXPECT_FALSE(accepts(schema, R"("a\nb")"));
  // Inside an object, as the schema suite's string_lengths sends it.
  const std::string object =
      R"({"type":"object","properties":{"code":{"type":"string","minLength":4,"maxLength":4}},)"
      R"("required":["code"]})";
  EXPECT_TRUE(accepts(object, R"({"code": "ab 2"})"));
  EXPECT_FALSE(accepts(object, "{\"code\": \"ab\t2\"}"));
  // The unbounded string takes escapes and refuses raw control characters.
  EXPECT_TRUE(accepts(R"({"type":"string"})", R"("a\nb\t\u0001")"));
  EXPECT_FALSE(accepts(R"({"type":"string"})", "\"a\tb\""));
}

TEST_F(JsonStringGrammar, DateIsACalendarDate) {
  const std::string date = R"({"type":"string","format":"date"})";
  for (const char* valid : {"2024-02-29", "2000-02-29", "2023-12-31", "0001-01-01", "9999-12-31",
                            "0400-02-29", "2023-04-30", "2023-02-28"}) {
    EXPECT_TRUE(accepts(date, quoted(valid))) << valid;
  }
  // Not leap years (1900: by 100, not by 400), days past the month's end, year 0, month 13.
  for (const char* invalid :
       {"2023-02-29", "1900-02-29", "2022-02-31", "2022-04-31", "0000-01-01", "2022-13-01",
        "2022-00-10", "2022-01-00", "2022-01-32", "2100-02-29"}) {
    EXPECT_FALSE(accepts(date, quoted(invalid))) << invalid;
  }
  // date-time's date is the same; a leap second is 23:59:60 UTC, no other minute has one.
  const std::string date_time = R"({"type":"string","format":"date-time"})";
  EXPECT_TRUE(accepts(date_time, R"("2024-02-29T12:34:56.5+01:00")"));
  EXPECT_TRUE(accepts(date_time, R"("2016-12-31T23:59:60Z")"));
  EXPECT_FALSE(accepts(date_time, R"("2016-12-31T12:00:60Z")"));
  EXPECT_FALSE(accepts(date_time, R"("2016-12-31T23:59:60+01:00")"));
  EXPECT_FALSE(accepts(date_time, R"("2023-02-29T12:00:00Z")"));
  EXPECT_FALSE(accepts(date_time, R"("0000-01-01T12:00:00Z")"));
}

TEST_F(JsonStringGrammar, IpOctetsHaveNoLeadingZeros) {
  const std::string ipv4 = R"({"type":"string","format":"ipv4"})";
  for (const char* valid : {"0.0.0.0", "10.0.0.1", "192.168.100.255", "255.255.255.255"}) {
    EXPECT_TRUE(accepts(ipv4, quoted(valid))) << valid;
  }
  for (const char* invalid : {"01.2.3.4", "1.2.3.004", "256.1.1.1", "1.2.3"}) {
    EXPECT_FALSE(accepts(ipv4, quoted(invalid))) << invalid;
  }
  const std::string ipv6 = R"({"type":"string","format":"ipv6"})";
  EXPECT_TRUE(accepts(ipv6, R"("::ffff:192.168.0.1")"));
  EXPECT_TRUE(accepts(ipv6, R"("fe80::1:2")"));
  EXPECT_FALSE(accepts(ipv6, R"("::ffff:192.168.0.01")"));
}

TEST_F(JsonStringGrammar, FormatsWithFreeTextAreJsonText) {
  // A quoted local part's quoted-pair: an escaped backslash, then the character.
  const std::string email = R"({"type":"string","format":"email"})";
  EXPECT_TRUE(accepts(email, R"("ada@example.com")"));
  EXPECT_TRUE(accepts(email, R"("\"a\\q b\"@example.com")"));
  EXPECT_FALSE(accepts(email, R"("\"a\q b\"@example.com")"));
  // A JSON pointer's reference tokens: no raw control character.
  const std::string pointer = R"({"type":"string","format":"json-pointer"})";
  EXPECT_TRUE(accepts(pointer, R"("/a~1b/0")"));
  EXPECT_TRUE(accepts(pointer, R"("/a\tb")"));
  EXPECT_FALSE(accepts(pointer, "\"/a\tb\""));
  EXPECT_FALSE(accepts(pointer, R"("/a\qb")"));
}

}  // namespace
}  // namespace lm
