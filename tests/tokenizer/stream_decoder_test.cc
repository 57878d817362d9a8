// StreamDecoder on tiny vocabularies: multi-byte characters and emoji split across tokens are
// held back until complete, nothing is repeated or dropped, and flush releases what is left.
#include "tokenizer/stream_decoder.h"

#include <gtest/gtest.h>

#include "tiny_vocab.h"

namespace lm {
namespace {

using namespace testing_tok;
using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> byte_tokenizer() {
  Json j = bpe_json(byte_alphabet(), {});
  j["decoder"] = {{"type", "ByteLevel"}};
  return load(j);
}

std::vector<std::string> stream_all(const Tokenizer& tok, const Ids& ids) {
  StreamDecoder decoder(tok);
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(decoder.push(id));
  out.push_back(decoder.flush());
  return out;
}

TEST(StreamDecoder, HoldsBackSplitMultibyteCharacters) {
  auto tok = byte_tokenizer();
  ASSERT_TRUE(tok);
  // "é😀!" byte by byte (ids are byte values in this vocabulary).
  const Ids ids = {0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80, '!'};
  EXPECT_EQ(stream_all(*tok, ids), (std::vector<std::string>{"", "é", "", "", "", "😀", "!", ""}));
}

TEST(StreamDecoder, ZwjEmojiSequenceArrivesWhole) {
  auto tok = byte_tokenizer();
  ASSERT_TRUE(tok);
  const std::string family = "👨‍👩‍👧";
  Ids ids;
  for (unsigned char c : family) ids.push_back(c);
  std::string text;
  for (const std::string& piece : stream_all(*tok, ids)) text += piece;
  EXPECT_EQ(text, family);
}

TEST(StreamDecoder, FlushReleasesATrailingIncompleteCharacter) {
  auto tok = byte_tokenizer();
  ASSERT_TRUE(tok);
  const auto pieces = stream_all(*tok, Ids{'a', 0xE2, 0x82});
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "", "", "\xEF\xBF\xBD"}));
}

TEST(StreamDecoder, SentencePieceLeadingSpaceAfterPrompt) {
  // "▁Hello" after a prompt must stream as " Hello", though decoding it alone strips the space.
  Json j = bpe_json({"<unk>", "<s>", "\xE2\x96\x81Hi", "\xE2\x96\x81there", "!"}, {});
  j["model"]["unk_token"] = "<unk>";
  j["added_tokens"] = Json::array({added(0, "<unk>", true), added(1, "<s>", true)});
  j["decoder"] = {
      {"type", "Sequence"},
      {"decoders",
       Json::array(
           {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
            {{"type", "ByteFallback"}},
            {{"type", "Fuse"}},
            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  auto tok = load(j);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->decode(Ids{3}, false), "there");
  const Ids prompt = {1, 2};
  StreamDecoder decoder(*tok, prompt);
  EXPECT_EQ(decoder.push(3), " there");
  EXPECT_EQ(decoder.push(4), "!");
  EXPECT_EQ(decoder.flush(), "");
  // Without a prompt the first token loses its space, exactly like the full decode.
  StreamDecoder fresh(*tok);
  EXPECT_EQ(fresh.push(2), "Hi");
  EXPECT_EQ(fresh.push(3), " there");
}

std::unique_ptr<Tokenizer> byte_fallback_tokenizer() {
  std::vector<std::string> v = {"<unk>", "a"};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.push_back(name);
  }
  Json j = bpe_json(v, {});
  j["model"]["unk_token"] = "<unk>";
  j["model"]["byte_fallback"] = true;
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", Json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}};
  return load(j);
}

TEST(StreamDecoder, ByteFallbackRunsAreHeldUntilTheyEnd) {
  auto tok = byte_fallback_tokenizer();
  ASSERT_TRUE(tok);
  const int32_t kByte0 = 2;  // id of <0x00>
  // "€" = E2 82 AC as three byte tokens, then "a": the run is released when it ends.
  EXPECT_EQ(stream_all(*tok, Ids{kByte0 + 0xE2, kByte0 + 0x82, kByte0 + 0xAC, 1}),
            (std::vector<std::string>{"", "", "", "€a", ""}));
  // A run that turns invalid at its end decodes to one U+FFFD per byte (HF's ByteFallback), even
  // though its first three bytes formed a valid character: the stream must agree.
  const Ids invalid = {1, kByte0 + 0xEE, kByte0 + 0x80, kByte0 + 0x80, kByte0 + 0xEF};
  std::string text;
  for (const std::string& piece : stream_all(*tok, invalid)) text += piece;
  EXPECT_EQ(text, tok->decode(invalid, false));
  EXPECT_EQ(text, "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(StreamDecoder, PromptWindowNeverStartsInsideAByteRun) {
  auto tok = byte_fallback_tokenizer();
  ASSERT_TRUE(tok);
  const int32_t kByte0 = 2;
  // The prompt ends inside a run of byte tokens ("é€€") that the generated ids continue ("é"):
  // a window of the last five prompt ids would start mid-character and turn the run to U+FFFD.
  const Ids prompt = {1,
                      kByte0 + 0xC3,
                      kByte0 + 0xA9,
                      kByte0 + 0xE2,
                      kByte0 + 0x82,
                      kByte0 + 0xAC,
                      kByte0 + 0xE2,
                      kByte0 + 0x82,
                      kByte0 + 0xAC};
  StreamDecoder decoder(*tok, prompt);
  EXPECT_EQ(decoder.push(kByte0 + 0xC3), "");
  EXPECT_EQ(decoder.push(kByte0 + 0xA9), "");
  EXPECT_EQ(decoder.push(1), "éa");
  EXPECT_EQ(decoder.flush(), "");
}

TEST(StreamDecoder, OutOfRangeIdsAreSkipped) {
  auto tok = byte_tokenizer();
  ASSERT_TRUE(tok);
  StreamDecoder decoder(*tok);
  EXPECT_EQ(decoder.push('a'), "a");
  EXPECT_EQ(decoder.push(1 << 20), "");
  EXPECT_EQ(decoder.push(-1), "");
  EXPECT_EQ(decoder.push('b'), "b");
}

}  // namespace
}  // namespace lm
