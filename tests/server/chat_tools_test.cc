#include "server/openai/chat_tools.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace lm {
namespace {

using OJson = nlohmann::ordered_json;

ChatTool tool(std::string name, std::string parameters,
              std::optional<std::string> description = {}) {
  return ChatTool{std::move(name), std::move(description), std::move(parameters)};
}

const ChatTool kWeather = tool("get_weather",
                               R"({"type":"object","properties":{"location":{"type":"string"},
                               "unit":{"enum":["c","f"]}},"required":["location"],
                               "$defs":{"d":{"type":"integer"}}})",
                               "Weather now");

TEST(ToolGrammar, IsTgisCallObjectWithNameFirst) {
  const OJson schema = OJson::parse(tool_grammar_schema({kWeather, tool("ping", "{}")}));
  EXPECT_EQ(schema["required"], OJson::array({"function"}));
  EXPECT_EQ(schema["additionalProperties"], false);
  const OJson& any_of = schema["properties"]["function"]["anyOf"];
  ASSERT_EQ(any_of.size(), 2u);
  const OJson& weather = any_of[0];
  std::vector<std::string> keys;
  for (const auto& [k, v] : weather["properties"].items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"_name", "location", "unit"}));
  EXPECT_EQ(weather["properties"]["_name"], (OJson{{"type", "string"}, {"const", "get_weather"}}));
  EXPECT_EQ(weather["required"], OJson::array({"_name", "location"}));
  EXPECT_EQ(weather["additionalProperties"], false);
  EXPECT_EQ(weather["description"], "Weather now");
  EXPECT_EQ(schema["$defs"]["d"]["type"], "integer");  // hoisted where "#/$defs/d" points
  EXPECT_EQ(any_of[1]["required"], OJson::array({"_name"}));
  EXPECT_EQ(any_of[1]["description"], "");
}

TEST(ToolGrammar, AdditionalPropertiesOnlyForTheStringTrue) {
  auto extra = [](const std::string& value) {
    const OJson schema = OJson::parse(tool_grammar_schema(
        {tool("f", R"({"type":"object","additionalProperties":)" + value + "}")}));
    return schema["properties"]["function"]["anyOf"][0]["additionalProperties"].get<bool>();
  };
  EXPECT_TRUE(extra(R"("true")"));
  EXPECT_FALSE(extra("true"));
  EXPECT_FALSE(extra("false"));
}

TEST(ToolChoiceSet, AutoAddsNoToolRequiredAndNamedDoNot) {
  const std::vector<ChatTool> tools = {kWeather, tool("ping", "{}")};
  auto names = [](const std::vector<ChatTool>& set) {
    std::vector<std::string> out;
    for (const auto& t : set) out.push_back(t.name);
    return out;
  };
  EXPECT_EQ(names(selected_tools(tools, {})),
            (std::vector<std::string>{"get_weather", "ping", "no_tool"}));
  EXPECT_EQ(names(selected_tools(tools, {ToolChoiceKind::kRequired, ""})),
            (std::vector<std::string>{"get_weather", "ping"}));
  EXPECT_EQ(names(selected_tools(tools, {ToolChoiceKind::kNamed, "ping"})),
            (std::vector<std::string>{"ping"}));
  EXPECT_TRUE(selected_tools(tools, {ToolChoiceKind::kNone, ""}).empty());
  EXPECT_TRUE(selected_tools({}, {}).empty());
  EXPECT_TRUE(selected_tools({}, {ToolChoiceKind::kRequired, ""}).empty());
  // no_tool's content argument is what an auto answer in text is read from.
  const OJson no_tool = OJson::parse(tool_grammar_schema(selected_tools(tools, {})));
  EXPECT_EQ(no_tool["properties"]["function"]["anyOf"][2]["required"],
            OJson::array({"_name", "content"}));
}

TEST(ToolChoiceSet, ValidationErrors) {
  EXPECT_FALSE(validate_tools({kWeather}, {}).has_value());
  EXPECT_EQ(validate_tools({kWeather, kWeather}, {})->error,
            "Tool error: Tool name get_weather is used more than once");
  EXPECT_EQ(validate_tools({kWeather}, {ToolChoiceKind::kNamed, "x"})->error,
            "Tool error: Tool with name x not found");
  EXPECT_EQ(validate_tools({kWeather}, {ToolChoiceKind::kNamed, "x"})->error_type, "tool_error");
  EXPECT_TRUE(validate_tools({tool("no_tool", "{}")}, {}).has_value());
  EXPECT_FALSE(validate_tools({tool("no_tool", "{}")}, {ToolChoiceKind::kRequired, ""}));
  EXPECT_TRUE(validate_tools({tool("f", R"({"properties":{"_name":{}}})")}, {}).has_value());
  EXPECT_TRUE(validate_tools({tool("f", R"({"properties":[]})")}, {}).has_value());
  EXPECT_TRUE(validate_tools({tool("f", R"({"required":"a"})")}, {}).has_value());
}

TEST(ToolTemplate, ToolsAsTgiShowsThem) {
  EXPECT_EQ(
      template_tools_json({kWeather, tool("ping", "{}")}),
      R"([{"type":"function","function":{"description":"Weather now","name":"get_weather",)"
      R"("arguments":"{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"},)"
      R"(\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"location\"],)"
      R"(\"$defs\":{\"d\":{\"type\":\"integer\"}}}"}},)"
      R"({"type":"function","function":{"description":null,"name":"ping","arguments":"{}"}}])");
}

TEST(ParseToolCall, NameAndCompactArgumentsInOrder) {
  auto call = parse_tool_call(
      R"({"function": {"_name": "get_weather", "unit": "c", "location": "Paris"}})");
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->name, "get_weather");
  EXPECT_EQ(call->arguments, R"({"unit":"c","location":"Paris"})");
  EXPECT_FALSE(call->no_tool());
  call = parse_tool_call(R"({"function": {"_name": "no_tool", "content": "Hi there"}})");
  ASSERT_TRUE(call.has_value());
  EXPECT_TRUE(call->no_tool());
  EXPECT_EQ(call->content, "Hi there");
  EXPECT_FALSE(parse_tool_call(R"({"function": {"_name": "f", "a": )").has_value());
  EXPECT_FALSE(parse_tool_call(R"({"function": {"a": 1}})").has_value());
  EXPECT_FALSE(parse_tool_call("Hello").has_value());
}

// Feeds `pieces` and returns the name and the concatenated arguments as a client rebuilds them.
std::pair<std::string, std::string> stream(const std::vector<std::string>& pieces,
                                           size_t* num_deltas = nullptr) {
  ToolCallStream s;
  std::string name, arguments;
  size_t n = 0;
  auto take = [&](const std::optional<ToolCallStream::Delta>& d) {
    if (!d) return;
    ++n;
    if (d->name) {
      EXPECT_TRUE(name.empty());
      name = *d->name;
    } else {
      EXPECT_FALSE(name.empty()) << "arguments before the name";
    }
    arguments += d->arguments;
  };
  for (const auto& p : pieces) take(s.push(p));
  take(s.finish());
  if (num_deltas) *num_deltas = n;
  return {name, arguments};
}

TEST(ToolCallStream, RebuildsNameAndArguments) {
  size_t n = 0;
  auto [name, arguments] = stream({"{\"", "function", "\": {\"", "_name", "\": \"get", "_weather",
                                   "\", \"", "location", "\": \"", "Paris", " }", "\"}", "}"},
                                  &n);
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, R"({"location": "Paris }"})");
  EXPECT_TRUE(nlohmann::json::accept(arguments));
  EXPECT_GE(n, 4u);  // streamed, not sent at the end

  std::tie(name, arguments) =
      stream({R"({"function": {"_name": "f", "a": {"b": [1, {"c": 2}]}}})"});
  EXPECT_EQ(name, "f");
  EXPECT_EQ(arguments, R"({"a": {"b": [1, {"c": 2}]}})");

  std::tie(name, arguments) = stream({R"({"function": {"_name": "ping")", "}", "}"});
  EXPECT_EQ(name, "ping");
  EXPECT_EQ(arguments, "{}");
}

TEST(ToolCallStream, NoToolContentStreamsDecoded) {
  ToolCallStream s;
  std::string content;
  for (const std::string piece :
       {R"({"function": {"_name": "no_)", R"(tool", "con)", R"(tent": ")", "Hi", R"( \)",
        R"("you\)", R"(u00e9 \ud83d)", R"(\ude00)", R"(!\n"}})"}) {
    EXPECT_FALSE(s.push(piece).has_value());
    const std::string delta = s.take_content();
    EXPECT_EQ(delta.find('\\'), std::string::npos) << "an undecoded escape: " << delta;
    content += delta;
  }
  EXPECT_EQ(content, "Hi \"you\u00e9 \U0001F600!\n");
  EXPECT_EQ(s.take_content(), "");
  ToolCallStream call;
  call.push(R"({"function": {"_name": "f", "content": "x"}})");
  EXPECT_EQ(call.take_content(), "");  // only no_tool's content is text
}

TEST(ToolCallStream, NoToolAndUnfinishedObjectsSendNothing) {
  ToolCallStream s;
  EXPECT_FALSE(s.push(R"({"function": {"_na)").has_value());
  EXPECT_FALSE(s.name_known());
  EXPECT_FALSE(s.push(R"(me": "no_tool", "content": "Hi"}})").has_value());
  EXPECT_TRUE(s.is_no_tool());
  EXPECT_FALSE(s.finish().has_value());
  ToolCallStream cut;
  EXPECT_FALSE(cut.push(R"({"function": {"_name": "f)").has_value());
  EXPECT_FALSE(cut.finish().has_value());
}

}  // namespace
}  // namespace lm
