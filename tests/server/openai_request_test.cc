#include "server/openai/openai_request.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

ChatRequest chat(std::string_view body) {
  auto parsed = parse_chat_request(body);
  EXPECT_TRUE(std::holds_alternative<ChatRequest>(parsed)) << std::get<BodyRejection>(parsed).body;
  return std::get<ChatRequest>(parsed);
}

BodyRejection chat_rejection(std::string_view body) {
  auto parsed = parse_chat_request(body);
  EXPECT_TRUE(std::holds_alternative<BodyRejection>(parsed)) << body;
  return std::holds_alternative<BodyRejection>(parsed) ? std::get<BodyRejection>(parsed)
                                                       : BodyRejection{};
}

TEST(ParseChatRequest, ReadsFieldsAndIgnoresUnknownOnes) {
  ChatRequest r = chat(R"({"model":"tgi","messages":[{"role":"system","content":"Be brief."},
    {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"image_url",
    "image_url":{"url":"http://x/y.png"}}],"name":"bob"}],"max_completion_tokens":7,"n":2,
    "temperature":0,"top_p":1,"stop":"END","seed":42,"logprobs":true,"top_logprobs":3,
    "stream":true,"stream_options":{"include_usage":true},"frequency_penalty":0.5,
    "presence_penalty":-1,"user":"someone","logit_bias":null,"tool_choice":"none",
    "tools":[{"type":"function","function":{"name":"f"}}]})");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "Hi ![](http://x/y.png)");
  EXPECT_EQ(r.max_tokens, 7u);
  EXPECT_EQ(r.n, 2u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.seed, 42u);
  EXPECT_TRUE(r.logprobs && r.stream && r.include_usage);
  EXPECT_EQ(r.top_logprobs, 3u);
  EXPECT_FALSE(r.uses_tools);  // tool_choice "none"
  GenerateParameters p = chat_generate_parameters(r);
  EXPECT_FALSE(p.do_sample);
  EXPECT_FALSE(p.temperature.has_value());
  EXPECT_FALSE(p.top_p.has_value());
  EXPECT_EQ(p.top_n_tokens, 3u);
  EXPECT_TRUE(p.details);
  EXPECT_FALSE(p.adapter_id.has_value());
}

TEST(ParseChatRequest, AbsentTemperatureSamples) {
  GenerateParameters p = chat_generate_parameters(chat(R"({"messages":[]})"));
  EXPECT_TRUE(p.do_sample);
  p = chat_generate_parameters(chat(R"({"messages":[],"temperature":0.7,"top_p":0.9})"));
  EXPECT_TRUE(p.do_sample);
  EXPECT_FLOAT_EQ(*p.temperature, 0.7f);
  EXPECT_FLOAT_EQ(*p.top_p, 0.9f);
}

TEST(ParseChatRequest, AssistantToolCallsBecomeJsonContent) {
  ChatRequest r = chat(R"({"messages":[{"role":"assistant","tool_calls":[{"id":"0",
    "type":"function","function":{"name":"f","arguments":{"a":1}}}]}]})");
  EXPECT_NE(r.messages[0].content.find(R"("arguments":"{\"a\":1}")"), std::string::npos)
      << r.messages[0].content;
}

TEST(ParseChatRequest, ShapeErrorsAre422AndSyntaxErrors400) {
  EXPECT_EQ(chat_rejection("{").status, 400);
  EXPECT_EQ(chat_rejection("[]").status, 422);
  BodyRejection r = chat_rejection(R"({})");
  EXPECT_EQ(r.status, 422);
  EXPECT_NE(r.body.find("missing field `messages`"), std::string::npos);
  r = chat_rejection(R"({"messages":[{"role":"user"}]})");
  EXPECT_NE(r.body.find("messages[0]: missing field `content`"), std::string::npos) << r.body;
  r = chat_rejection(R"({"messages":[{"role":"user","content":null}]})");
  EXPECT_EQ(r.status, 422);
  r = chat_rejection(R"({"messages":[{"role":"user","content":5}]})");
  EXPECT_NE(r.body.find("messages[0].content: invalid type"), std::string::npos) << r.body;
  r = chat_rejection(R"({"messages":[],"max_tokens":"ten"})");
  EXPECT_NE(r.body.find("max_tokens: invalid type: string \"ten\""), std::string::npos) << r.body;
  r = chat_rejection(R"({"messages":[],"n":-1})");
  EXPECT_EQ(r.status, 422);
  r = chat_rejection(R"({"messages":[],"stop":[1]})");
  EXPECT_NE(r.body.find("stop[0]"), std::string::npos) << r.body;
  r = chat_rejection(R"({"messages":[],"logit_bias":[1.0]})");
  EXPECT_NE(r.body.find("logit_bias: invalid type"), std::string::npos) << r.body;
  r = chat_rejection(R"({"messages":[],"logit_bias":{"5":"x"}})");
  EXPECT_NE(r.body.find("logit_bias.5: invalid type"), std::string::npos) << r.body;
}

TEST(ValidateChatRequest, ClearMessages) {
  const ValidationLimits limits;
  auto check = [&](std::string_view body) {
    auto e = validate_chat_request(chat(body), limits, 4);
    return e ? e->status == 422 ? e->error : "status " + std::to_string(e->status) : "";
  };
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}]})"), "");
  EXPECT_EQ(check(R"({"messages":[]})"), "Input validation error: `messages` must not be empty");
  EXPECT_NE(check(R"({"messages":[{"role":"wizard","content":"x"}]})").find("`messages[0].role`"),
            std::string::npos);
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"n":5})"),
            "Input validation error: `n` must be > 0 and <= 4. Given: 5");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"n":0})"),
            "Input validation error: `n` must be > 0 and <= 4. Given: 0");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":21})"),
            "Input validation error: `top_logprobs` must be >= 0 and <= 5. Given: 21");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"presence_penalty":3})"),
            "Input validation error: `presence_penalty` must be >= -2.0 and <= 2.0");
  EXPECT_EQ(
      check(R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"42":-100,"7":3.5}})"),
      "");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"logit_bias":null})"), "");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"42":101}})"),
            "Input validation error: `logit_bias` values must be >= -100 and <= 100. Given: "
            "101.000000 for token 42");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"a1":1}})"),
            "Input validation error: `logit_bias` keys must be token ids. Given: \"a1\"");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
    "function":{"name":"f"}}]})"),
            "");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
    "function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]})"),
            "Tool error: Tool name f is used more than once");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
    "function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})"),
            "Tool error: Tool with name g not found");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
    "function":{"name":"f"}}],"tool_choice":"g"})"),
            "Tool error: Tool with name g not found");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
    "function":{"name":""}}]})"),
            "Tool error: every tool needs a non-empty `function.name`");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
    "function":{"name":"f","parameters":{"type":"string"}}}]})"),
            "Tool error: the parameters of tool f must have \"type\": \"object\"");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
    "function":{"name":"f","parameters":[1]}}]})"),
            "Tool error: the parameters of tool f must be a JSON Schema object");
  // tool_choice "none" ignores the tools, as TGI does.
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",
    "function":{"name":"f"}},{"type":"function","function":{"name":"f"}}],"tool_choice":"none"})"),
            "");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],
    "response_format":{"type":"json_object"}})"),
            "");
  EXPECT_EQ(check(R"({"messages":[{"role":"user","content":"x"}],"tools":[],
    "response_format":{"type":"json_object"}})"),
            "Tool error: Grammar and tools are mutually exclusive");
}

TEST(ParseChatRequest, ResponseFormatBecomesTgisGrammar) {
  auto grammar_of = [](const std::string& format) -> std::optional<GrammarParameter> {
    auto parsed = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],)"
                                     R"("response_format":)" +
                                     format + "}");
    EXPECT_TRUE(std::holds_alternative<ChatRequest>(parsed)) << format;
    if (!std::holds_alternative<ChatRequest>(parsed)) return std::nullopt;
    return chat_generate_parameters(std::get<ChatRequest>(parsed)).grammar;
  };
  EXPECT_FALSE(grammar_of(R"({"type":"text"})"));
  auto any = grammar_of(R"({"type":"json_object"})");
  ASSERT_TRUE(any);
  EXPECT_EQ(any->type, kAnyJsonObjectGrammar);
  // OpenAI's json_schema, keys kept in the order sent (the order they are generated in).
  auto schema = grammar_of(
      R"({"type":"json_schema","json_schema":{"name":"p","strict":true,)"
      R"("schema":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}}}})");
  ASSERT_TRUE(schema);
  EXPECT_EQ(schema->type, "json_schema");
  EXPECT_EQ(
      schema->value_json,
      R"({"schema":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}}})");
  // TGI's own shapes pass as they are (json_object with a value is json).
  auto tgi = grammar_of(R"({"type":"json_object","value":{"properties":{}}})");
  ASSERT_TRUE(tgi);
  EXPECT_EQ(tgi->type, "json");
  auto regex = grammar_of(R"({"type":"regex","value":"[a-z]+"})");
  ASSERT_TRUE(regex);
  EXPECT_EQ(regex->value_json, R"("[a-z]+")");

  auto rejection = [](const std::string& format) {
    auto parsed = parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],)"
                                     R"("response_format":)" +
                                     format + "}");
    return std::holds_alternative<BodyRejection>(parsed) ? std::get<BodyRejection>(parsed).body
                                                         : std::string();
  };
  EXPECT_NE(rejection(R"({"type":"xml"})").find("unknown variant `xml`"), std::string::npos);
  EXPECT_NE(rejection(R"({"type":"json_schema"})").find("missing field `json_schema`"),
            std::string::npos);
  EXPECT_NE(rejection(R"({"type":"regex","value":3})").find("expected a string"),
            std::string::npos);
}

TEST(ParseCompletionRequest, PromptStringOrList) {
  auto parsed = parse_completion_request(R"({"prompt":"a","echo":true,"logprobs":2,"n":2})");
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(parsed));
  CompletionRequest r = std::get<CompletionRequest>(parsed);
  EXPECT_EQ(r.prompts, std::vector<std::string>{"a"});
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.logprobs, 2u);
  parsed = parse_completion_request(R"({"prompt":["a","b"],"stop":["x","y"]})");
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(parsed));
  EXPECT_EQ(std::get<CompletionRequest>(parsed).prompts.size(), 2u);
  parsed = parse_completion_request(R"({"model":"x"})");
  ASSERT_TRUE(std::holds_alternative<BodyRejection>(parsed));
  EXPECT_NE(std::get<BodyRejection>(parsed).body.find("missing field `prompt`"), std::string::npos);
}

TEST(ParseCompletionRequest, PromptTokenIds) {
  auto ids = [](std::string_view body) {
    auto parsed = parse_completion_request(body);
    EXPECT_TRUE(std::holds_alternative<CompletionRequest>(parsed)) << body;
    const CompletionRequest& r = std::get<CompletionRequest>(parsed);
    EXPECT_TRUE(r.prompts.empty());
    return r.prompt_ids;
  };
  using Ids = std::vector<std::vector<int32_t>>;
  EXPECT_EQ(ids(R"({"prompt":[1,2]})"), (Ids{{1, 2}}));
  EXPECT_EQ(ids(R"({"prompt":[[1,2],[3],[]]})"), (Ids{{1, 2}, {3}, {}}));
  auto rejection = [](std::string_view body) {
    auto parsed = parse_completion_request(body);
    EXPECT_TRUE(std::holds_alternative<BodyRejection>(parsed)) << body;
    return std::holds_alternative<BodyRejection>(parsed) ? std::get<BodyRejection>(parsed).body
                                                         : std::string();
  };
  EXPECT_NE(rejection(R"({"prompt":[1,"a"]})").find("prompt[1]: invalid type"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":[-1]})").find("expected a token id"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":[4294967296]})").find("expected a token id"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":[[1],"a"]})").find("prompt[1]: invalid type"),
            std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":["a",1]})").find("prompt[1]: invalid type"), std::string::npos);
  // They count as prompts.
  const ValidationLimits limits;
  auto v = [&](std::string_view body) {
    return validate_completion_request(std::get<CompletionRequest>(parse_completion_request(body)),
                                       limits, 4, 4, false);
  };
  EXPECT_FALSE(v(R"({"prompt":[[1],[2],[3],[4]]})").has_value());
  EXPECT_EQ(v(R"({"prompt":[[1],[2],[3],[4],[5]]})")->error_type, "batch size exceeded");
}

TEST(ValidateCompletionRequest, TgiErrors) {
  const ValidationLimits limits;
  auto v = [&](std::string_view body) {
    return validate_completion_request(std::get<CompletionRequest>(parse_completion_request(body)),
                                       limits, 4, 4, /*prompt_logprobs_enabled=*/false);
  };
  EXPECT_FALSE(v(R"({"prompt":"a"})").has_value());
  EXPECT_EQ(v(R"({"prompt":"a","suffix":"b"})")->error_type, "suffix not supported");
  EXPECT_EQ(v(R"({"prompt":["a","b","c","d","e"]})")->error_type, "batch size exceeded");
  EXPECT_EQ(v(R"({"prompt":[]})")->status, 422);
  EXPECT_EQ(v(R"({"prompt":"a","logprobs":6})")->status, 422);
}

TEST(ValidateCompletionRequest, EchoWithLogprobsNeedsPromptLogprobs) {
  const ValidationLimits limits;
  auto v = [&](std::string_view body, bool enabled) {
    return validate_completion_request(std::get<CompletionRequest>(parse_completion_request(body)),
                                       limits, 4, 4, enabled);
  };
  const auto error = v(R"({"prompt":"a","echo":true,"logprobs":0})", false);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->status, 422);
  EXPECT_EQ(error->error_type, "validation");
  EXPECT_NE(error->error.find("--enable-prefill-logprobs"), std::string::npos) << error->error;
  EXPECT_FALSE(v(R"({"prompt":"a","echo":true,"logprobs":1})", true).has_value());
  // Either alone needs no prompt logprobs.
  EXPECT_FALSE(v(R"({"prompt":"a","echo":true})", false).has_value());
  EXPECT_FALSE(v(R"({"prompt":"a","logprobs":1})", false).has_value());
}

TEST(CompletionAdmissionRequest, EchoWithLogprobsAsksForThePromptsLogprobs) {
  auto admission = [](std::string_view body) {
    return completion_admission_request(
        std::get<CompletionRequest>(parse_completion_request(body)));
  };
  AdmissionRequest r = admission(R"({"prompt":"a","echo":true,"logprobs":2,"max_tokens":3})");
  EXPECT_TRUE(r.prompt_logprobs);
  EXPECT_EQ(r.parameters.top_n_tokens, 2u);
  EXPECT_EQ(r.parameters.max_new_tokens, 3u);
  EXPECT_FALSE(admission(R"({"prompt":"a","logprobs":2})").prompt_logprobs);
  EXPECT_FALSE(admission(R"({"prompt":"a","echo":true})").prompt_logprobs);
  // max_tokens 0 with echo scores the prompt: one token runs (and is dropped by the sink).
  EXPECT_EQ(admission(R"({"prompt":"a","echo":true,"max_tokens":0})").parameters.max_new_tokens,
            1u);
  // Without echo it stays 0, for TGI's "must be strictly positive".
  EXPECT_EQ(admission(R"({"prompt":"a","max_tokens":0})").parameters.max_new_tokens, 0u);
}

TEST(InvocationShape, DispatchesByKey) {
  EXPECT_EQ(invocation_shape(R"({"inputs":"x","messages":[]})"), InvocationShape::kGenerate);
  EXPECT_EQ(invocation_shape(R"({"messages":[]})"), InvocationShape::kChat);
  EXPECT_EQ(invocation_shape(R"({"prompt":"x"})"), InvocationShape::kCompletion);
  EXPECT_EQ(invocation_shape(R"({"other":1})"), InvocationShape::kNone);
  EXPECT_EQ(invocation_shape("{bad"), InvocationShape::kGenerate);
}

}  // namespace
}  // namespace lm

namespace lm {
namespace {

constexpr std::string_view kWeatherTools = R"("tools":[{"type":"function","function":{
  "name":"get_weather","description":"Weather now","parameters":{"type":"object",
  "properties":{"location":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["location"]}}},
  {"type":"function","function":{"name":"get_time","parameters":{"type":"object",
  "properties":{"zone":{"type":"string"}}}}}])";

ChatRequest tool_chat(std::string_view extra) {
  std::string body = R"({"messages":[{"role":"user","content":"x"}],)" + std::string(kWeatherTools);
  if (!extra.empty()) body += "," + std::string(extra);
  return chat(body + "}");
}

TEST(ParseChatRequest, ToolsKeepOrderAndChoiceSelectsTheSet) {
  ChatRequest r = tool_chat("");
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools[0].description, "Weather now");
  EXPECT_LT(r.tools[0].parameters_json.find("location"), r.tools[0].parameters_json.find("unit"))
      << r.tools[0].parameters_json;
  EXPECT_FALSE(r.tools[1].description.has_value());
  EXPECT_EQ(r.tool_choice.kind, ToolChoiceKind::kAuto);
  EXPECT_TRUE(r.uses_tools);
  EXPECT_EQ(selected_tools(r.tools, r.tool_choice).size(), 3u);  // + no_tool
  EXPECT_EQ(selected_tools(r.tools, r.tool_choice).back().name, "no_tool");

  r = tool_chat(
      R"("tool_choice":"required","tool_prompt":"Call one.","parallel_tool_calls":false)");
  EXPECT_EQ(selected_tools(r.tools, r.tool_choice).size(), 2u);
  EXPECT_EQ(r.tool_prompt, "Call one.");
  EXPECT_EQ(r.parallel_tool_calls, false);
  EXPECT_FALSE(r.parallel_calls);
  AdmissionRequest a = chat_admission_request(r);
  ASSERT_TRUE(a.chat_tools.has_value());
  EXPECT_EQ(a.chat_tools->tool_prompt, "Call one.");
  ASSERT_TRUE(a.parameters.grammar.has_value());
  EXPECT_EQ(a.parameters.grammar->type, "json");

  r = tool_chat(R"("tool_choice":{"type":"function","function":{"name":"get_time"}})");
  EXPECT_EQ(r.tool_choice.kind, ToolChoiceKind::kNamed);
  ASSERT_EQ(selected_tools(r.tools, r.tool_choice).size(), 1u);
  EXPECT_EQ(selected_tools(r.tools, r.tool_choice)[0].name, "get_time");

  r = tool_chat(R"("tool_choice":"none")");
  EXPECT_FALSE(r.uses_tools);
  a = chat_admission_request(r);
  EXPECT_FALSE(a.chat_tools.has_value());
  EXPECT_FALSE(a.parameters.grammar.has_value());

  r = tool_chat(R"("tool_prompt":"")");
  EXPECT_EQ(chat_tool_prompt(r)->tool_prompt, kDefaultToolPrompt);
}

TEST(ParseChatRequest, ParallelCallsOnlyWhenSentTrueWithAutoOrRequired) {
  // Absent (TGI's clients), null or false: TGI's single call, the same grammar and tool prompt.
  const ChatRequest tgi = tool_chat("");
  EXPECT_FALSE(tgi.parallel_tool_calls.has_value());
  for (const char* off : {R"("parallel_tool_calls":false)", R"("parallel_tool_calls":null)"}) {
    const ChatRequest r = tool_chat(off);
    EXPECT_FALSE(r.parallel_calls) << off;
    const AdmissionRequest a = chat_admission_request(r);
    const AdmissionRequest b = chat_admission_request(tgi);
    EXPECT_EQ(a.parameters.grammar->type, "json");
    EXPECT_EQ(a.parameters.grammar->value_json, b.parameters.grammar->value_json);
    EXPECT_EQ(a.parameters.grammar->value_json,
              tool_grammar_schema(selected_tools(tgi.tools, tgi.tool_choice)));
    EXPECT_EQ(a.chat_tools->tool_prompt, kDefaultToolPrompt);
  }
  for (const char* choice : {R"("auto")", R"("required")"}) {
    const ChatRequest r =
        tool_chat(std::string(R"("parallel_tool_calls":true,"tool_choice":)") + choice);
    EXPECT_TRUE(r.parallel_calls) << choice;
    const AdmissionRequest a = chat_admission_request(r);
    EXPECT_EQ(a.parameters.grammar->type, kToolCallsGrammar);
    EXPECT_EQ(a.parameters.grammar->value_json,
              parallel_tool_grammar_schema(selected_tools(r.tools, r.tool_choice)));
    EXPECT_EQ(a.chat_tools->tool_prompt, parallel_tool_prompt());
  }
  // A named tool is one call; none is no call; a sent tool_prompt is kept.
  EXPECT_FALSE(tool_chat(R"("parallel_tool_calls":true,"tool_choice":"get_time")").parallel_calls);
  EXPECT_FALSE(tool_chat(R"("parallel_tool_calls":true,"tool_choice":"none")").parallel_calls);
  EXPECT_FALSE(chat(R"({"messages":[{"role":"user","content":"x"}],"parallel_tool_calls":true})")
                   .parallel_calls);
  // A user tool named no_tool (allowed with required) keeps the single call.
  EXPECT_FALSE(chat(R"({"messages":[{"role":"user","content":"x"}],"parallel_tool_calls":true,)"
                    R"("tool_choice":"required","tools":[{"type":"function","function":)"
                    R"({"name":"no_tool","parameters":{"type":"object"}}}]})")
                   .parallel_calls);
  EXPECT_EQ(
      chat_tool_prompt(tool_chat(R"("parallel_tool_calls":true,"tool_prompt":"Go.")"))->tool_prompt,
      "Go.");
}

TEST(ParseChatRequest, MalformedToolsAreDeserializationErrors) {
  const std::string base = R"({"messages":[{"role":"user","content":"x"}],)";
  EXPECT_NE(chat_rejection(base + R"("tools":[{"type":"function","function":{}}]})")
                .body.find("tools[0].function: missing field `name`"),
            std::string::npos);
  EXPECT_NE(chat_rejection(base + R"("tools":[{"type":"function"}]})")
                .body.find("missing field `function`"),
            std::string::npos);
  EXPECT_EQ(chat_rejection(base + R"("tools":{}})").status, 422);
  EXPECT_EQ(chat_rejection(base + R"("tools":[],"tool_choice":3})").status, 422);
  EXPECT_EQ(chat_rejection(base + R"("tools":[],"parallel_tool_calls":"yes"})").status, 422);
}

}  // namespace
}  // namespace lm
