// Parallel tool calls (chat_tools.h): the grammar of an answer that is one call object or an
// array of them, checked through XGrammar itself on a one-character-per-token vocabulary, and
// reading a complete answer back.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "../tokenizer/tiny_vocab.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_vocab.h"
#include "server/openai/chat_tools.h"

namespace lm {
namespace {

using OJson = nlohmann::ordered_json;

ChatTool tool(std::string name, std::string parameters) {
  return ChatTool{std::move(name), std::nullopt, std::move(parameters)};
}

const ChatTool kWeather =
    tool("get_weather", R"({"type":"object","properties":{"city":{"$ref":"#/$defs/city"}},)"
                        R"("required":["city"],"$defs":{"city":{"enum":["Paris","Rome"]}}})");
const ChatTool kPing = tool("ping", "{}");

TEST(ParallelToolGrammar, OneCallOrAnArrayOfCallsWithoutNoTool) {
  const std::vector<ChatTool> selected = selected_tools({kWeather, kPing}, {});  // auto
  const OJson schema = OJson::parse(parallel_tool_grammar_schema(selected));
  ASSERT_EQ(schema["anyOf"].size(), 2u);
  // The first branch is TGI's call object exactly, no_tool included; $defs move to the root.
  OJson single = OJson::parse(tool_grammar_schema(selected));
  EXPECT_EQ(schema["$defs"], single["$defs"]);
  single.erase("$defs");
  EXPECT_EQ(schema["anyOf"][0], single);
  const OJson& array = schema["anyOf"][1];
  EXPECT_EQ(array["type"], "array");
  EXPECT_EQ(array["minItems"], 1);
  EXPECT_EQ(array["maxItems"], kMaxParallelToolCalls);
  const OJson& functions = array["items"]["properties"]["function"]["anyOf"];
  ASSERT_EQ(functions.size(), 2u);
  EXPECT_EQ(functions[0]["properties"]["_name"]["const"], "get_weather");
  EXPECT_EQ(functions[1]["properties"]["_name"]["const"], "ping");
  EXPECT_FALSE(array["items"].contains("$defs"));
}

// Every printable ASCII character is one token; "</s>" ends.
class CharGrammar : public testing::Test {
 protected:
  static constexpr char kFirst = ' ';
  static constexpr int32_t kNumChars = '~' - ' ' + 1;
  void SetUp() override {
    std::vector<std::string> tokens;
    for (char c = kFirst; c <= '~'; ++c) tokens.emplace_back(1, c);
    tokens.push_back("</s>");
    testing_tok::Json j = testing_tok::bpe_json(tokens, {});
    j["added_tokens"] = {testing_tok::added(kNumChars, "</s>", /*special=*/true)};
    tokenizer_ = testing_tok::load(j);
    ASSERT_NE(tokenizer_, nullptr);
    vocab_ =
        std::make_unique<GrammarVocab>(*tokenizer_, kNumChars + 1, std::vector<int32_t>{kNumChars});
    compiler_ = std::make_unique<GrammarCompiler>(*vocab_);
  }
  // Whether the grammar takes `text` whole, character by character.
  bool accepts(const std::string& schema, const std::string& text) {
    auto grammar = compiler_->compile({GrammarKind::kJsonSchema, schema});
    EXPECT_TRUE(grammar.ok()) << grammar.error().message;
    if (!grammar.ok()) return false;
    GrammarMatcher matcher(*grammar);
    for (char c : text) {
      if (!matcher.accept_token(c - kFirst)) return false;
    }
    return matcher.can_terminate();
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<GrammarVocab> vocab_;
  std::unique_ptr<GrammarCompiler> compiler_;
};

TEST_F(CharGrammar, ArraysOfCallsUpToTheBoundAndNoToolOnlyAlone) {
  const std::string schema =
      parallel_tool_grammar_schema(selected_tools({kWeather, kPing}, {}));  // auto
  const std::string weather = R"({"function": {"_name": "get_weather", "city": "Rome"}})";
  const std::string ping = R"({"function": {"_name": "ping"}})";
  const std::string no_tool = R"({"function": {"_name": "no_tool", "content": "Hi"}})";
  EXPECT_TRUE(accepts(schema, weather));  // TGI's one call object
  EXPECT_TRUE(accepts(schema, no_tool));  // auto's text answer, alone
  EXPECT_TRUE(accepts(schema, "[" + weather + "]"));
  EXPECT_TRUE(accepts(schema, "[" + weather + ", " + ping + ", " + weather + "]"));
  std::string eight = "[" + ping;
  for (size_t i = 1; i < kMaxParallelToolCalls; ++i) eight += ", " + ping;
  EXPECT_TRUE(accepts(schema, eight + "]"));
  EXPECT_FALSE(accepts(schema, eight + ", " + ping + "]"));  // one past the bound
  EXPECT_FALSE(accepts(schema, "[]"));
  EXPECT_FALSE(accepts(schema, "[" + no_tool + "]"));
  EXPECT_FALSE(accepts(schema, "[" + weather + ", " + no_tool + "]"));
  // Each call still follows its tool's parameters ($defs resolved at the root).
  EXPECT_FALSE(accepts(schema, R"([{"function": {"_name": "get_weather", "city": "Oslo"}}])"));
  EXPECT_FALSE(accepts(schema, R"([{"function": {"_name": "get_weather"}}])"));
  EXPECT_FALSE(accepts(schema, R"([{"function": {"_name": "nope"}}])"));
  // Without parallel calls the grammar is TGI's: no array at all.
  EXPECT_FALSE(
      accepts(tool_grammar_schema(selected_tools({kWeather, kPing}, {})), "[" + weather + "]"));
}

TEST(ParseToolCalls, OneObjectOrAnArrayInParallelMode) {
  const std::string array =
      R"([{"function": {"_name": "get_weather", "city": "Rome"}}, {"function": {"_name": "ping"}}])";
  auto calls = parse_tool_calls(array, /*allow_array=*/true);
  ASSERT_TRUE(calls.has_value());
  ASSERT_EQ(calls->size(), 2u);
  EXPECT_EQ((*calls)[0].name, "get_weather");
  EXPECT_EQ((*calls)[0].arguments, R"({"city":"Rome"})");
  EXPECT_EQ((*calls)[1].name, "ping");
  EXPECT_EQ((*calls)[1].arguments, "{}");
  EXPECT_FALSE(parse_tool_calls(array, /*allow_array=*/false).has_value());
  calls = parse_tool_calls(R"({"function": {"_name": "no_tool", "content": "Hi"}})", true);
  ASSERT_TRUE(calls.has_value());
  ASSERT_EQ(calls->size(), 1u);
  EXPECT_TRUE(calls->front().no_tool());
  EXPECT_EQ(calls->front().content, "Hi");
  EXPECT_FALSE(parse_tool_calls("[]", true).has_value());
  EXPECT_FALSE(parse_tool_calls(R"([{"function": {"_name": "no_tool", "content": "Hi"}}])", true));
  EXPECT_FALSE(parse_tool_calls(R"([{"function": {"_name": "ping"}}, 3])", true));
  EXPECT_FALSE(parse_tool_calls(R"([{"function": {"_name": "ping"}})", true));  // cut short
}

}  // namespace
}  // namespace lm
