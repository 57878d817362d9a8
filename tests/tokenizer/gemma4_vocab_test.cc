// Gemma 4's GGUF vocabulary (tokenizer.ggml.model "gemma4"). On a hand-built vocabulary: the
// pipeline's rules (spaces as "▁" with no prefix, the stored merges, byte fallback, BOS always).
// On llama.cpp's vocab-only ggml-vocab-gemma-4.gguf: its turn tokens, decoding, and its chat
// template through our Jinja interpreter (llamacpp_vocab_test.cc runs its encoding vectors).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loader/gguf_file.h"
#include "template/chat_template.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/gguf_vocab_reader.h"
#include "tokenizer/tokenizer.h"

namespace lm {
namespace {

constexpr int32_t kNormal = 1, kControl = 3, kByte = 6;

// ids: 0 <pad>, 1 <eos>, 2 <bos>, 3 <unk>, 4 <|turn>, 5 <0xC3>, 6 <0xA9>, 7 ▁, 8 a, 9 b, 10 ab,
// 11 ▁ab.
GgufVocab tiny_gemma4() {
  GgufVocab v;
  v.model = "gemma4";
  v.tokens = {"<pad>",
              "<eos>",
              "<bos>",
              "<unk>",
              "<|turn>",
              "<0xC3>",
              "<0xA9>",
              "\xE2\x96\x81",
              "a",
              "b",
              "ab",
              "\xE2\x96\x81"
              "ab"};
  v.token_types = {kControl, kControl, kControl, kControl, kControl, kByte,
                   kByte,    kNormal,  kNormal,  kNormal,  kNormal,  kNormal};
  v.merges = {"a b", "\xE2\x96\x81 ab"};
  v.bos_id = 2;
  v.eos_id = 1;
  v.unk_id = 3;
  v.add_space_prefix = false;
  return v;
}

TEST(Gemma4Vocab, SpacesBecomeMetaspaceWithoutAPrefix) {
  auto tok = Tokenizer::from_gguf_vocab(tiny_gemma4());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->encode("ab ab", false), (std::vector<int32_t>{10, 11}));
  EXPECT_EQ((*tok)->encode("ab", false), (std::vector<int32_t>{10}));  // not "▁ab"
  EXPECT_EQ((*tok)->encode(" ab", false), (std::vector<int32_t>{11}));
}

TEST(Gemma4Vocab, UnknownCharactersFallBackToBytesAndDecodeBack) {
  auto tok = Tokenizer::from_gguf_vocab(tiny_gemma4());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const std::vector<int32_t> ids = (*tok)->encode("ab \xC3\xA9", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{10, 7, 5, 6}));
  EXPECT_EQ((*tok)->decode(ids, false), "ab \xC3\xA9");
}

TEST(Gemma4Vocab, ControlTokensAreParsedAndBosIsAlwaysAdded) {
  GgufVocab v = tiny_gemma4();
  v.add_bos = false;  // as some converted files say; Gemma 4 starts with <bos> regardless
  auto tok = Tokenizer::from_gguf_vocab(v);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->encode("<|turn>ab", true), (std::vector<int32_t>{2, 4, 10}));
  EXPECT_TRUE((*tok)->is_special(4));
}

TEST(Gemma4Vocab, RequiresMerges) {
  GgufVocab v = tiny_gemma4();
  v.merges.clear();
  auto tok = Tokenizer::from_gguf_vocab(v);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.error().message.find("tokenizer.ggml.merges"), std::string::npos);
}

// Built once for the suite: 262144 tokens and 514906 merges take seconds to load.
class Gemma4File : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto file = GgufFile::open(LM_REPO_ROOT "/models/vocab/ggml-vocab-gemma-4.gguf");
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto vocab = read_gguf_vocab(*file);
    ASSERT_TRUE(vocab.ok()) << vocab.error().message;
    auto tok = Tokenizer::from_gguf_vocab(*vocab);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    shared_ = std::move(tok).value().release();
  }
  static void TearDownTestSuite() {
    delete shared_;
    shared_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(shared_, nullptr); }
  static inline Tokenizer* shared_ = nullptr;
  const Tokenizer* tokenizer_ = shared_;
};

TEST_F(Gemma4File, ParsesTurnTokensAndStartsWithBos) {
  const int32_t turn = *tokenizer_->token_to_id("<|turn>");
  const int32_t end_turn = *tokenizer_->token_to_id("<turn|>");
  EXPECT_TRUE(tokenizer_->is_special(turn));
  const std::vector<int32_t> ids = tokenizer_->encode("<|turn>user\nHi<turn|>", true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), *tokenizer_->bos_id());
  EXPECT_EQ(ids[1], turn);
  EXPECT_EQ(ids.back(), end_turn);
  EXPECT_EQ(tokenizer_->decode(ids, /*skip_special_tokens=*/true), "user\nHi");
}

TEST_F(Gemma4File, DecodesWhatItEncodes) {
  for (const std::string text : {"  two leading spaces\n\n\n\ttab", "日本語 😀 r\xC3\xA9sum\xC3\xA9",
                                 "zero\xE2\x80\x8Bwidth \xF0\x9F\xA6\x99"}) {
    EXPECT_EQ(tokenizer_->decode(tokenizer_->encode(text, false), false), text);
  }
}

// The GGUF carries the model's chat template; it must compile and render as Python jinja2 does
// (expected output from jinja2 3.1 with transformers' options over this file's template).
TEST_F(Gemma4File, ChatTemplateRendersAsJinja2) {
  ASSERT_FALSE(tokenizer_->chat_template().empty());
  auto compiled = ChatTemplate::compile(tokenizer_->chat_template());
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  ChatRenderInput input;
  input.messages_json =
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello!"}])";
  input.bos_token = "<bos>";
  input.eos_token = "<eos>";
  auto prompt = compiled->render(input);
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_EQ(*prompt,
            "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nHello!<turn|>\n<|turn>model\n"
            "<|channel>thought\n<channel|>");
}

}  // namespace
}  // namespace lm
