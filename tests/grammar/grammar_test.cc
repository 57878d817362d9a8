// grammar/: our vocabularies as XGrammar sees them (byte-level BPE and SentencePiece-style), the
// compiled-grammar cache, compile errors, and a matcher walking a JSON document token by token.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gguf_test_tokenizer.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_vocab.h"

namespace lm {
namespace {

bool allowed(const std::vector<int32_t>& bitmask, int32_t id) {
  return ((static_cast<uint32_t>(bitmask[static_cast<size_t>(id / 32)]) >> (id % 32)) & 1u) != 0;
}

// SmolLM2's vocabulary: byte-level BPE, <|im_end|> (2) its EOS.
class SmolLm2Grammar : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = load_gguf_tokenizer("models/SmolLM2-135M-Instruct.Q4_1.gguf").release();
    ASSERT_NE(tokenizer_, nullptr);
    eos_ = id_of(*tokenizer_, "<|im_end|>");
    vocab_ = new GrammarVocab(*tokenizer_, tokenizer_->vocab_size() + 64, {eos_});
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete tokenizer_;
  }
  static Tokenizer* tokenizer_;
  static GrammarVocab* vocab_;
  static int32_t eos_;
};
Tokenizer* SmolLm2Grammar::tokenizer_ = nullptr;
GrammarVocab* SmolLm2Grammar::vocab_ = nullptr;
int32_t SmolLm2Grammar::eos_ = -1;

TEST_F(SmolLm2Grammar, VocabHoldsEachTokensBytes) {
  EXPECT_EQ(vocab_->token_bytes(id_of(*tokenizer_, "Ġthe")), " the");
  EXPECT_EQ(vocab_->token_bytes(id_of(*tokenizer_, "Ċ")), "\n");
  EXPECT_EQ(vocab_->token_bytes(id_of(*tokenizer_, "{\"")), "{\"");
  // Special tokens are "" (never allowed by a grammar); the EOS is the stop id.
  EXPECT_EQ(vocab_->token_bytes(eos_), "");
  EXPECT_EQ(vocab_->token_bytes(id_of(*tokenizer_, "<|im_start|>")), "");
  EXPECT_EQ(vocab_->stop_ids(), std::vector<int32_t>{eos_});
  // The logits may be wider than the tokenizer: the extra ids exist and are never allowed.
  EXPECT_EQ(vocab_->vocab_size(), tokenizer_->vocab_size() + 64);
}

TEST_F(SmolLm2Grammar, CacheKeepsTheMostRecentlyUsed) {
  GrammarCompiler compiler(*vocab_, /*max_cached=*/2);
  auto a = compiler.compile({GrammarKind::kRegex, "a+"});
  auto b = compiler.compile({GrammarKind::kRegex, "b+"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(compiler.num_cached(), 2u);
  auto a_again = compiler.compile({GrammarKind::kRegex, "a+"});  // a becomes the most recent
  ASSERT_TRUE(a_again.ok());
  EXPECT_EQ(a_again->get(), a->get());
  ASSERT_TRUE(compiler.compile({GrammarKind::kRegex, "c+"}).ok());  // evicts b
  EXPECT_EQ(compiler.num_cached(), 2u);
  EXPECT_EQ(compiler.compile({GrammarKind::kRegex, "a+"})->get(), a->get());
  EXPECT_NE(compiler.compile({GrammarKind::kRegex, "b+"})->get(), b->get());
  // The kind is part of the key.
  auto schema = compiler.compile({GrammarKind::kJsonSchema, "true"});  // any JSON
  auto regex = compiler.compile({GrammarKind::kRegex, "true"});
  ASSERT_TRUE(schema.ok()) << schema.error().message;
  ASSERT_TRUE(regex.ok()) << regex.error().message;
  EXPECT_NE(schema->get(), regex->get());
}

TEST_F(SmolLm2Grammar, InvalidGrammarsFailWithXGrammarsMessage) {
  GrammarCompiler compiler(*vocab_);
  auto regex = compiler.compile({GrammarKind::kRegex, "(ab"});
  ASSERT_FALSE(regex.ok());
  EXPECT_FALSE(regex.error().message.empty());
  EXPECT_EQ(regex.error().message.find('['), std::string::npos) << regex.error().message;
  auto not_json = compiler.compile({GrammarKind::kJsonSchema, "{\"type\": "});
  ASSERT_FALSE(not_json.ok());
  EXPECT_FALSE(not_json.error().message.empty());
  auto bad_type = compiler.compile({GrammarKind::kJsonSchema, R"({"type": "frobnicate"})"});
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.error().message.find("frobnicate"), std::string::npos)
      << bad_type.error().message;
  EXPECT_EQ(compiler.num_cached(), 0u);  // failures are not cached
}

// Fail closed: what XGrammar would accept and then not enforce is refused at compile time, by
// the keywords it ignores silently or by the warnings it logs while dropping a constraint.
TEST_F(SmolLm2Grammar, ConstraintsXGrammarWouldNotEnforceAreRefused) {
  GrammarCompiler compiler(*vocab_);
  const auto refused = [&](GrammarKind kind, const std::string& text) -> std::string {
    auto result = compiler.compile({kind, text});
    return result.ok() ? "" : result.error().message;
  };
  EXPECT_EQ(
      refused(GrammarKind::kJsonSchema,
              R"({"type":"object","properties":{"tags":{"type":"array","uniqueItems":true}}})"),
      "it uses `uniqueItems` at /properties/tags, which the grammar engine does not enforce");
  EXPECT_NE(refused(GrammarKind::kJsonSchema, R"({"not":{"type":"string"}})"), "");
  EXPECT_NE(
      refused(GrammarKind::kJsonSchema,
              R"({"$defs":{"a":{"type":"array","contains":{"const":1}}},"$ref":"#/$defs/a"})"),
      "");
  // A standard format XGrammar has no rule for (it would generate any string); a format no
  // validator checks stays a free string.
  EXPECT_EQ(refused(GrammarKind::kJsonSchema,
                    R"({"type":"object","properties":{"p":{"type":"string","format":"regex"}}})"),
            "it uses `format: regex` at /properties/p, which the grammar engine does not enforce");
  EXPECT_NE(refused(GrammarKind::kJsonSchema, R"({"type":"string","format":"idn-email"})"), "");
  EXPECT_EQ(refused(GrammarKind::kJsonSchema, R"({"type":"string","format":"password"})"), "");
  // Dropped with a warning: multipleOf on numbers, lengths beside a pattern, several allOf.
  EXPECT_NE(
      refused(GrammarKind::kJsonSchema, R"({"type":"number","multipleOf":0.5})").find("multipleOf"),
      std::string::npos);
  EXPECT_NE(
      refused(GrammarKind::kJsonSchema, R"({"type":"string","pattern":"[a-z]+","maxLength":3})"),
      "");
  EXPECT_NE(
      refused(GrammarKind::kJsonSchema, R"({"allOf":[{"type":"object"},{"required":["a"]}]})"), "");
  // A regex feature it would ignore: lookahead.
  EXPECT_NE(refused(GrammarKind::kRegex, "a(?=b)b"), "");
  // Property names that spell a keyword are names, and what it enforces compiles.
  EXPECT_EQ(refused(GrammarKind::kJsonSchema,
                    R"({"type":"object","properties":{"contains":{"type":"string"},)"
                    R"("not":{"type":"integer","multipleOf":5}}})"),
            "");
  EXPECT_EQ(refused(GrammarKind::kRegex, "[a-z]{2,4}-[0-9]+"), "");
}

TEST_F(SmolLm2Grammar, MatcherWalksAJsonDocument) {
  GrammarCompiler compiler(*vocab_);
  auto grammar = compiler.compile(
      {GrammarKind::kJsonSchema,
       R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},)"
       R"("required":["name","age"]})"});
  ASSERT_TRUE(grammar.ok()) << grammar.error().message;
  GrammarMatcher matcher(*grammar);
  std::vector<int32_t> bitmask(static_cast<size_t>(grammar_bitmask_words(matcher.vocab_size())));
  const std::vector<int32_t> ids =
      tokenizer_->encode(R"({"name": "Ada", "age": 36})", /*add_special_tokens=*/false);
  for (int32_t id : ids) {
    ASSERT_TRUE(matcher.fill_next_token_bitmask(bitmask));
    EXPECT_FALSE(allowed(bitmask, eos_)) << "EOS before the document is complete";
    EXPECT_FALSE(allowed(bitmask, matcher.vocab_size() - 1)) << "an id past the tokenizer";
    ASSERT_TRUE(allowed(bitmask, id)) << tokenizer_->token_text(id);
    ASSERT_TRUE(matcher.accept_token(id)) << tokenizer_->token_text(id);
    EXPECT_FALSE(matcher.is_terminated());
  }
  EXPECT_TRUE(matcher.can_terminate());
  ASSERT_TRUE(matcher.fill_next_token_bitmask(bitmask));
  EXPECT_TRUE(allowed(bitmask, eos_));  // complete: only the stop id remains
  EXPECT_FALSE(allowed(bitmask, id_of(*tokenizer_, "Ġthe")));
  EXPECT_TRUE(matcher.accept_token(eos_));
  EXPECT_TRUE(matcher.is_terminated());
  ASSERT_TRUE(matcher.fill_next_token_bitmask(bitmask));  // after the end: the stop id only
  EXPECT_TRUE(allowed(bitmask, eos_));

  // A token the grammar does not allow is refused and changes nothing; rollback and reset undo.
  matcher.reset();
  EXPECT_FALSE(matcher.accept_token(id_of(*tokenizer_, "Ġthe")));
  EXPECT_FALSE(matcher.accept_token(eos_));
  ASSERT_TRUE(matcher.accept_token(ids[0]));
  ASSERT_TRUE(matcher.accept_token(ids[1]));
  matcher.rollback(1);
  ASSERT_TRUE(matcher.accept_token(ids[1]));
  EXPECT_FALSE(matcher.can_terminate());
}

TEST_F(SmolLm2Grammar, RegexAndAnyJsonObject) {
  GrammarCompiler compiler(*vocab_);
  auto digits = compiler.compile({GrammarKind::kRegex, "[0-9]{3}"});
  ASSERT_TRUE(digits.ok()) << digits.error().message;
  GrammarMatcher matcher(*digits);
  std::vector<int32_t> bitmask(static_cast<size_t>(grammar_bitmask_words(matcher.vocab_size())));
  ASSERT_TRUE(matcher.fill_next_token_bitmask(bitmask));
  EXPECT_FALSE(allowed(bitmask, id_of(*tokenizer_, "a")));
  EXPECT_TRUE(allowed(bitmask, id_of(*tokenizer_, "1")));
  for (int32_t id : tokenizer_->encode("123", false)) ASSERT_TRUE(matcher.accept_token(id));
  EXPECT_TRUE(matcher.can_terminate());

  auto object = compiler.compile({GrammarKind::kJsonObject, ""});
  ASSERT_TRUE(object.ok()) << object.error().message;
  GrammarMatcher any(*object);
  EXPECT_FALSE(any.accept_token(id_of(*tokenizer_, "[")));  // an object, not any JSON value
  for (int32_t id : tokenizer_->encode(R"({"x": [1, "y"]})", false))
    ASSERT_TRUE(any.accept_token(id)) << tokenizer_->token_text(id);
  EXPECT_TRUE(any.can_terminate());
}

// Llama-2's SentencePiece vocabulary: "▁" is a space, <0xXX> tokens are single bytes.
TEST(SentencePieceGrammar, VocabHoldsEachTokensBytes) {
  std::unique_ptr<Tokenizer> tokenizer =
      load_gguf_tokenizer("models/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tokenizer, nullptr);
  const int32_t eos = tokenizer->eos_id().value_or(2);
  GrammarVocab vocab(*tokenizer, tokenizer->vocab_size(), {eos});
  EXPECT_EQ(vocab.token_bytes(id_of(*tokenizer, "▁the")), " the");
  EXPECT_EQ(vocab.token_bytes(id_of(*tokenizer, "<0x41>")), "A");
  EXPECT_EQ(vocab.token_bytes(id_of(*tokenizer, "<0x0A>")), "\n");
  EXPECT_EQ(vocab.token_bytes(id_of(*tokenizer, "<0xE2>")), "\xE2");  // a lone UTF-8 lead byte
  EXPECT_EQ(vocab.token_bytes(eos), "");
  EXPECT_EQ(vocab.token_bytes(*tokenizer->bos_id()), "");

  // A regex with a space and a non-ASCII character is reachable through these tokens.
  GrammarCompiler compiler(vocab);
  auto grammar = compiler.compile({GrammarKind::kRegex, "the (cat|café)"});
  ASSERT_TRUE(grammar.ok()) << grammar.error().message;
  GrammarMatcher matcher(*grammar);
  for (int32_t id : tokenizer->encode("the café", /*add_special_tokens=*/false)) {
    // SentencePiece prepends "▁" to the text: the first token's leading space is not text here.
    if (id == id_of(*tokenizer, "▁the")) {
      ASSERT_TRUE(matcher.accept_token(id_of(*tokenizer, "the")));
      continue;
    }
    ASSERT_TRUE(matcher.accept_token(id)) << tokenizer->token_text(id);
  }
  EXPECT_TRUE(matcher.can_terminate());
  const int32_t e_acute_lead = id_of(*tokenizer, "<0xC3>");
  matcher.reset();
  for (int32_t id : tokenizer->encode("the caf", false)) {
    if (id == id_of(*tokenizer, "▁the")) id = id_of(*tokenizer, "the");
    ASSERT_TRUE(matcher.accept_token(id)) << tokenizer->token_text(id);
  }
  EXPECT_TRUE(matcher.accept_token(e_acute_lead));  // é as two byte tokens
  EXPECT_TRUE(matcher.accept_token(id_of(*tokenizer, "<0xA9>")));
  EXPECT_TRUE(matcher.can_terminate());
}

}  // namespace
}  // namespace lm
