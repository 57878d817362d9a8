// Unit tests on hand-built tiny vocabularies: merge order, ignore_merges, byte fallback, unknown
// fusing, added tokens (longest match, lstrip/rstrip, normalized), post-processor, decoders.
#include <gtest/gtest.h>

#include "tiny_vocab.h"

namespace lm {
namespace {

using namespace testing_tok;
using Ids = std::vector<int32_t>;

TEST(Bpe, AppliesMergesByRankNotPosition) {
  // a=0 b=1 c=2 ab=3 bc=4 abc=5
  const std::vector<std::string> v = {"a", "b", "c", "ab", "bc", "abc"};
  auto bc_first = load(bpe_json(v, {{"b", "c"}, {"a", "b"}, {"ab", "c"}}));
  ASSERT_TRUE(bc_first);
  EXPECT_EQ(bc_first->encode("abc", false), (Ids{0, 4}));  // "a bc" is not a merge
  auto ab_first = load(bpe_json(v, {{"a", "b"}, {"b", "c"}, {"ab", "c"}}));
  ASSERT_TRUE(ab_first);
  EXPECT_EQ(ab_first->encode("abc", false), (Ids{5}));
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  auto tok = load(bpe_json({"a", "aa"}, {{"a", "a"}}));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("aaa", false), (Ids{1, 0}));
  EXPECT_EQ(tok->encode("aaaa", false), (Ids{1, 1}));
}

TEST(Bpe, MergesAcceptStringForm) {
  Json j = bpe_json({"a", "b", "ab"}, {});
  j["model"]["merges"] = Json::array({"a b"});
  auto tok = load(j);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("abab", false), (Ids{2, 2}));
}

TEST(Bpe, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  Json j = bpe_json({"a", "b", "c", "abc"}, {});
  auto plain = load(j);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->encode("abc", false), (Ids{0, 1, 2}));
  j["model"]["ignore_merges"] = true;
  auto ignoring = load(j);
  ASSERT_TRUE(ignoring);
  EXPECT_EQ(ignoring->encode("abc", false), (Ids{3}));
  EXPECT_EQ(ignoring->encode("ab", false), (Ids{0, 1}));
}

Json byte_fallback_json(bool byte_fallback, bool fuse_unk) {
  std::vector<std::string> v = {"<unk>", "a"};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.push_back(name);
  }
  Json j = bpe_json(v, {});
  j["model"]["unk_token"] = "<unk>";
  j["model"]["byte_fallback"] = byte_fallback;
  j["model"]["fuse_unk"] = fuse_unk;
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", Json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}}})}};
  return j;
}

TEST(Bpe, ByteFallbackSpellsUnknownCharactersAsBytes) {
  auto tok = load(byte_fallback_json(true, true));
  ASSERT_TRUE(tok);
  // "é" = C3 A9, byte token id = 2 + byte.
  EXPECT_EQ(tok->encode("aé", false), (Ids{1, 2 + 0xC3, 2 + 0xA9}));
  EXPECT_EQ(tok->decode(Ids{1, 2 + 0xC3, 2 + 0xA9}, false), "aé");
  // An incomplete sequence decodes to one U+FFFD per byte, as HF's ByteFallback does.
  EXPECT_EQ(tok->decode(Ids{2 + 0xE2, 2 + 0x82, 1}, false),
            "\xEF\xBF\xBD\xEF\xBF\xBD"
            "a");
}

TEST(Bpe, UnknownCharactersFuseWhenAsked) {
  auto fused = load(byte_fallback_json(false, true));
  ASSERT_TRUE(fused);
  EXPECT_EQ(fused->encode("éüa€", false), (Ids{0, 1, 0}));
  auto separate = load(byte_fallback_json(false, false));
  ASSERT_TRUE(separate);
  EXPECT_EQ(separate->encode("éüa", false), (Ids{0, 0, 1}));
}

// A character-level vocabulary with added tokens after it.
Json chars_with_added(const Json& added_tokens) {
  Json j = bpe_json({"a", "b", " ", "<", ">", "m", "x", "y"}, {});
  j["added_tokens"] = added_tokens;
  return j;
}

TEST(AddedTokens, LongestMatchWins) {
  auto tok = load(chars_with_added(
      Json::array({added(10, "<m>", true), added(11, "<m><m>", true), added(12, "ab", false)})));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("a<m><m><m>b", false), (Ids{0, 11, 10, 1}));
  EXPECT_EQ(tok->encode("aab", false), (Ids{0, 12}));
  EXPECT_EQ(tok->encode("<m", false), (Ids{3, 5}));
}

TEST(AddedTokens, LstripAndRstripSwallowWhitespace) {
  auto neither = load(chars_with_added(Json::array({added(10, "<m>", true)})));
  auto left = load(chars_with_added(Json::array({added(10, "<m>", true, true, false)})));
  auto right = load(chars_with_added(Json::array({added(10, "<m>", true, false, true)})));
  ASSERT_TRUE(neither && left && right);
  EXPECT_EQ(neither->encode("a  <m>  b", false), (Ids{0, 2, 2, 10, 2, 2, 1}));
  EXPECT_EQ(left->encode("a  <m>  b", false), (Ids{0, 10, 2, 2, 1}));
  EXPECT_EQ(right->encode("a  <m>  b", false), (Ids{0, 2, 2, 10, 1}));
}

TEST(AddedTokens, NormalizedTokensMatchAfterTheNormalizer) {
  Json j = chars_with_added(Json::array({added(10, "xy", false, false, false, true)}));
  j["normalizer"] = {{"type", "Lowercase"}};
  auto tok = load(j);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("aXYb", false), (Ids{0, 10, 1}));
  // A non-normalized token is matched on the raw text only.
  Json raw = chars_with_added(Json::array({added(10, "xy", false, false, false, false)}));
  raw["normalizer"] = {{"type", "Lowercase"}};
  auto raw_tok = load(raw);
  ASSERT_TRUE(raw_tok);
  EXPECT_EQ(raw_tok->encode("aXYb", false), (Ids{0, 6, 7, 1}));
  EXPECT_EQ(raw_tok->encode("axyb", false), (Ids{0, 10, 1}));
}

TEST(AddedTokens, DecodeSkipsOnlySpecialTokens) {
  auto tok = load(chars_with_added(Json::array({added(10, "<s>", true), added(11, "yy", false)})));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->decode(Ids{10, 0, 11, 1}, false), "<s> a yy b");  // no decoder: joined by ' '
  EXPECT_EQ(tok->decode(Ids{10, 0, 11, 1}, true), "a yy b");
  EXPECT_TRUE(tok->is_special(10));
  EXPECT_FALSE(tok->is_special(11));
  EXPECT_EQ(tok->token_to_id("yy"), 11);
  EXPECT_EQ(tok->vocab_size(), 12);
  EXPECT_EQ(tok->token_text(9), "");  // a hole in the ids
}

TEST(PostProcessor, TemplateAddsBosAndEosOnlyWhenAsked) {
  Json j = chars_with_added(Json::array({added(10, "<s>", true), added(11, "</s>", true)}));
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", Json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                              {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})},
      {"special_tokens",
       {{"<s>", {{"id", "<s>"}, {"ids", {10}}, {"tokens", {"<s>"}}}},
        {"</s>", {{"id", "</s>"}, {"ids", {11}}, {"tokens", {"</s>"}}}}}}};
  auto tok = load(j, Json{{"bos_token", "<s>"},
                          {"eos_token", {{"content", "</s>"}}},
                          {"chat_template", "{{ messages }}"}});
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("ab", true), (Ids{10, 0, 1, 11}));
  EXPECT_EQ(tok->encode("ab", false), (Ids{0, 1}));
  EXPECT_EQ(tok->encode("", true), (Ids{10, 11}));
  EXPECT_EQ(tok->bos_id(), 10);
  EXPECT_EQ(tok->eos_id(), 11);
  EXPECT_EQ(tok->chat_template(), "{{ messages }}");
}

TEST(PreTokenizers, DigitsAndByteLevel) {
  std::vector<std::string> v = byte_alphabet();  // ids 0..255 in byte order
  v.push_back("12");                             // 256, never reached: digits are isolated
  Json j = bpe_json(v, {{"1", "2"}});
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       Json::array({{{"type", "Digits"}, {"individual_digits", true}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}})}};
  j["decoder"] = {{"type", "ByteLevel"}};
  auto tok = load(j);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("a12", false), (Ids{'a', '1', '2'}));
  EXPECT_EQ(tok->encode(" \xC3\xA9", false), (Ids{' ', 0xC3, 0xA9}));
  EXPECT_EQ(tok->decode(Ids{' ', 0xC3, 0xA9}, false), " \xC3\xA9");
  EXPECT_EQ(tok->decode(Ids{'a', 0xC3}, false), "a\xEF\xBF\xBD");  // lossy, like HF
}

TEST(PreTokenizers, MetaspaceRoundTrip) {
  Json j = bpe_json({"\xE2\x96\x81", "a", "b",
                     "\xE2\x96\x81"
                     "a"},
                    {{"\xE2\x96\x81", "a"}});
  j["pre_tokenizer"] = {{"type", "Metaspace"},
                        {"replacement", "\xE2\x96\x81"},
                        {"prepend_scheme", "always"},
                        {"split", true}};
  j["decoder"] = {
      {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}};
  auto tok = load(j);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("a ab", false), (Ids{3, 3, 2}));
  EXPECT_EQ(tok->decode(Ids{3, 3, 2}, false), "a ab");
}

TEST(PreTokenizers, MetaspaceFirstPrependsOnlyAtTheStartOfTheInput) {
  // Expected ids checked with HF tokenizers 0.23.
  Json j = bpe_json({"\xE2\x96\x81", "a", "b",
                     "\xE2\x96\x81"
                     "a"},
                    {{"\xE2\x96\x81", "a"}});
  j["added_tokens"] = Json::array({added(4, "<m>", true)});
  j["pre_tokenizer"] = {{"type", "Metaspace"},
                        {"replacement", "\xE2\x96\x81"},
                        {"prepend_scheme", "first"},
                        {"split", false}};
  j["decoder"] = {
      {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}};
  auto tok = load(j);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("a<m>a", false), (Ids{3, 4, 1}));
  EXPECT_EQ(tok->encode(" a", false), (Ids{3}));
  EXPECT_EQ(tok->decode(Ids{0, 3, 0, 1}, false), " a a");
}

TEST(Encode, InvalidUtf8IsReadAsReplacementCharacter) {
  auto tok = load(byte_fallback_json(true, true));
  ASSERT_TRUE(tok);
  // 0xFF is not UTF-8: it becomes U+FFFD (EF BF BD), spelled with byte tokens.
  EXPECT_EQ(tok->encode("a\xFF", false), (Ids{1, 2 + 0xEF, 2 + 0xBF, 2 + 0xBD}));
}

}  // namespace
}  // namespace lm
