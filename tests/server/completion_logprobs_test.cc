// The legacy completions logprobs entries: an echoed prompt's tokens (first one null), their
// character offsets in the echoed text, and the chosen token always in its alternatives.
#include "server/openai/completion_logprobs.h"

#include <gtest/gtest.h>

#include "../tokenizer/tiny_vocab.h"

namespace lm {
namespace {

using Alternatives = std::vector<TokenAlternative>;

void expect_alternatives(const std::optional<Alternatives>& got, const Alternatives& want) {
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*got)[i].token, want[i].token);
    EXPECT_FLOAT_EQ((*got)[i].logprob, want[i].logprob);
  }
}

TEST(AlternativesWithToken, TheChosenTokenIsListedOnce) {
  const ResponseToken a{1, "a", -0.5f, false};
  const ResponseToken b{2, "b", -1.5f, false};
  expect_alternatives(alternatives_with_token(a, {a, b}), {{"a", -0.5f}, {"b", -1.5f}});
  // Not among the best (sampled, or a prompt token): added after them.
  const ResponseToken c{3, "c", -4.0f, false};
  expect_alternatives(alternatives_with_token(c, {a, b}),
                      {{"a", -0.5f}, {"b", -1.5f}, {"c", -4.0f}});
  expect_alternatives(alternatives_with_token(c, {}), {{"c", -4.0f}});
}

TEST(PieceOffsets, CountCharactersOfTheText) {
  // "é" is 2 bytes, 1 character.
  EXPECT_EQ(piece_offsets("ab é!", {"ab", " é", "!"}, {false, false, false}),
            (std::vector<size_t>{0, 2, 4}));
}

TEST(PieceOffsets, AnAddedSpecialTokenTakesNoRoom) {
  // A BOS the tokenizer added is not in the text, even where the text spells it later.
  EXPECT_EQ(piece_offsets("hi <s>", {"<s>", "hi", " ", "<s>"}, {true, false, false, true}),
            (std::vector<size_t>{0, 0, 2, 3}));
  // A piece decoding changed is skipped over; the next one is found after it.
  EXPECT_EQ(piece_offsets("a\u00a0b", {"a", "?", "b"}, {false, false, false}),
            (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(piece_offsets("ab", {"a", "", "b"}, {false, false, false}),
            (std::vector<size_t>{0, 1, 1}));
}

TEST(EchoLogprobs, PromptEntriesStartWithNulls) {
  // ids: 0 "<s>" (special), 1 "a", 2 "b", 3 "ab", 4 "é", 5 " ".
  testing_tok::Json j = testing_tok::bpe_json({"<s>", "a", "b", "ab", "é", " "}, {{"a", "b"}});
  j["added_tokens"].push_back(testing_tok::added(0, "<s>", true));
  j["decoder"] = {{"type", "Fuse"}};  // tokens decode as they are, joined
  auto tokenizer = testing_tok::load(j);
  ASSERT_NE(tokenizer, nullptr);
  SampleResult first;
  first.prompt_logprobs = {-1.0f, -2.0f, -3.0f};
  first.prompt_top_tokens = {{{3, -1.0f}}, {{1, -0.5f}, {2, -0.75f}}, {}};
  const std::vector<int32_t> ids = {0, 3, 5, 4};
  const CompletionLogprobs lp = echo_logprobs(*tokenizer, "ab é", ids, first);
  EXPECT_EQ(lp.tokens, (std::vector<std::string>{"<s>", "ab", " ", "é"}));
  ASSERT_EQ(lp.token_logprobs.size(), 4u);
  EXPECT_FALSE(lp.token_logprobs[0].has_value());
  EXPECT_FLOAT_EQ(lp.token_logprobs[1].value(), -1.0f);
  EXPECT_FLOAT_EQ(lp.token_logprobs[3].value(), -3.0f);
  ASSERT_EQ(lp.top_logprobs.size(), 4u);
  EXPECT_FALSE(lp.top_logprobs[0].has_value());
  expect_alternatives(lp.top_logprobs[1], {{"ab", -1.0f}});
  expect_alternatives(lp.top_logprobs[2], {{"a", -0.5f}, {"b", -0.75f}, {" ", -2.0f}});
  expect_alternatives(lp.top_logprobs[3], {{"é", -3.0f}});  // no alternatives asked for
  EXPECT_EQ(lp.text_offset, (std::vector<size_t>{0, 0, 2, 3}));

  // Then the generated tokens' entries follow.
  CompletionLogprobs all = lp;
  append_token_logprobs(all, {1, "a", -0.25f, false}, {}, 4);
  EXPECT_EQ(all.tokens.back(), "a");
  EXPECT_EQ(all.text_offset, (std::vector<size_t>{0, 0, 2, 3, 4}));
  EXPECT_FLOAT_EQ(all.token_logprobs.back().value(), -0.25f);

  // A one-token prompt: one null entry.
  const CompletionLogprobs one = echo_logprobs(*tokenizer, "a", std::vector<int32_t>{1}, {});
  EXPECT_EQ(one.tokens, (std::vector<std::string>{"a"}));
  EXPECT_FALSE(one.token_logprobs[0].has_value());
  EXPECT_FALSE(one.top_logprobs[0].has_value());
}

}  // namespace
}  // namespace lm
