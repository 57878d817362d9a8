#include "server/openai/openai_response.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

const OpenAiMeta kMeta{"m", "3.3.6-dev0-native", 1700000000};
using Alternatives = std::vector<TokenAlternative>;

TEST(OpenAiResponse, ChatCompletion) {
  ChatChoice c;
  c.content = "Hi";
  c.finish_reason = chat_finish_reason(FinishReason::kEosToken);
  EXPECT_EQ(chat_completion_json(kMeta, {c}, {5, 2}),
            R"({"object":"chat.completion","id":"","created":1700000000,"model":"m",)"
            R"("system_fingerprint":"3.3.6-dev0-native","choices":[{"index":0,"message":)"
            R"({"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}})");
}

TEST(OpenAiResponse, ChatToolCall) {
  ChatChoice c;
  c.tool_calls = {ChatToolCall{"0", "get_weather", R"({"location":"Paris"})"}};
  c.finish_reason = "tool_calls";
  EXPECT_EQ(chat_completion_json(kMeta, {c}, {5, 2}),
            R"({"object":"chat.completion","id":"","created":1700000000,"model":"m",)"
            R"("system_fingerprint":"3.3.6-dev0-native","choices":[{"index":0,"message":)"
            R"({"role":"assistant","content":null,"tool_calls":[{"id":"0","type":"function",)"
            R"("function":{"description":null,"name":"get_weather",)"
            R"("arguments":"{\"location\":\"Paris\"}"}}]},"logprobs":null,)"
            R"("finish_reason":"tool_calls"}],)"
            R"("usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}})");
}

TEST(OpenAiResponse, ChatToolCallChunks) {
  const std::string head =
      R"({"object":"chat.completion.chunk","id":"","created":1700000000,"model":"m",)"
      R"("system_fingerprint":"3.3.6-dev0-native","choices":[{"index":0,"delta":)"
      R"({"role":"assistant","tool_calls":[{"index":0,)";
  EXPECT_EQ(chat_tool_chunk_json(kMeta, 0, {0, "0", "f", "{"}, std::nullopt),
            head + R"("id":"0","type":"function","function":{"name":"f","arguments":"{"}}]},)" +
                R"("logprobs":null,"finish_reason":null}],"usage":null})");
  EXPECT_EQ(chat_tool_chunk_json(kMeta, 0, {0, std::nullopt, std::nullopt, "\"}"}, "tool_calls"),
            head + R"("function":{"arguments":"\"}"}}]},)" +
                R"("logprobs":null,"finish_reason":"tool_calls"}],"usage":null})");
}

TEST(OpenAiResponse, ParallelToolCallsOnePerEntry) {
  ChatChoice c;
  c.tool_calls = {ChatToolCall{"0", "get_weather", R"({"location":"Paris"})"},
                  ChatToolCall{"1", "get_time", R"({"timezone":"CET"})"}};
  c.finish_reason = "tool_calls";
  EXPECT_EQ(chat_completion_json(kMeta, {c}, {5, 2}),
            R"({"object":"chat.completion","id":"","created":1700000000,"model":"m",)"
            R"("system_fingerprint":"3.3.6-dev0-native","choices":[{"index":0,"message":)"
            R"({"role":"assistant","content":null,"tool_calls":[{"id":"0","type":"function",)"
            R"("function":{"description":null,"name":"get_weather",)"
            R"("arguments":"{\"location\":\"Paris\"}"}},{"id":"1","type":"function",)"
            R"("function":{"description":null,"name":"get_time",)"
            R"("arguments":"{\"timezone\":\"CET\"}"}}]},"logprobs":null,)"
            R"("finish_reason":"tool_calls"}],)"
            R"("usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}})");
  // A stream's delta names its call by `index` (choice 2, call 1 here).
  const std::string head =
      R"({"object":"chat.completion.chunk","id":"","created":1700000000,"model":"m",)"
      R"("system_fingerprint":"3.3.6-dev0-native","choices":[{"index":2,"delta":)"
      R"({"role":"assistant","tool_calls":[{"index":1,)";
  EXPECT_EQ(chat_tool_chunk_json(kMeta, 2, {1, "1", "get_time", "{"}, std::nullopt),
            head + R"("id":"1","type":"function","function":{"name":"get_time",)" +
                R"("arguments":"{"}}]},"logprobs":null,"finish_reason":null}],"usage":null})");
  EXPECT_EQ(chat_tool_chunk_json(kMeta, 2, {1, std::nullopt, std::nullopt, "}"}, std::nullopt),
            head + R"("function":{"arguments":"}"}}]},)" +
                R"("logprobs":null,"finish_reason":null}],"usage":null})");
}

TEST(OpenAiResponse, ChatChunkWithLogprobs) {
  ChatChunkChoice c;
  c.index = 1;
  c.content = "a";
  c.logprob = ChatTokenLogprob{"a", -0.5f, {{"a", -0.5f}, {"b", -1.0f}}};
  c.finish_reason = chat_finish_reason(FinishReason::kStopSequence);
  EXPECT_EQ(chat_chunk_json(kMeta, c),
            R"({"object":"chat.completion.chunk","id":"","created":1700000000,"model":"m",)"
            R"("system_fingerprint":"3.3.6-dev0-native","choices":[{"index":1,"delta":)"
            R"({"role":"assistant","content":"a"},"logprobs":{"content":[{"token":"a",)"
            R"("logprob":-0.5,"top_logprobs":[{"token":"a","logprob":-0.5},{"token":"b",)"
            R"("logprob":-1.0}]}]},"finish_reason":"stop_sequence"}],"usage":null})");
  EXPECT_EQ(chat_usage_chunk_json(kMeta, {1, 2}),
            R"({"object":"chat.completion.chunk","id":"","created":1700000000,"model":"m",)"
            R"("system_fingerprint":"3.3.6-dev0-native","choices":[],"usage":)"
            R"({"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}})");
}

TEST(OpenAiResponse, CompletionChunksFollowTgiKeyOrder) {
  CompletionChoice c;
  c.text = "x";
  EXPECT_EQ(completion_chunk_json(kMeta, c, std::nullopt),
            R"({"object":"text_completion","id":"","created":1700000000,"choices":[{"index":0,)"
            R"("text":"x","logprobs":null,"finish_reason":""}],"model":"m",)"
            R"("system_fingerprint":"3.3.6-dev0-native"})");
  c.finish_reason = "eos_token";
  c.logprobs = CompletionLogprobs{{"x"}, {-1.0f}, {Alternatives{{"x", -1.0f}}}, {0}};
  EXPECT_EQ(completion_chunk_json(kMeta, c, OpenAiUsage{3, 1}),
            R"({"object":"text_completion","id":"","created":1700000000,"model":"m",)"
            R"("system_fingerprint":"3.3.6-dev0-native","choices":[{"index":0,"text":"x",)"
            R"("logprobs":{"tokens":["x"],"token_logprobs":[-1.0],"top_logprobs":[{"x":-1.0}],)"
            R"("text_offset":[0]},"finish_reason":"eos_token"}],"usage":{"prompt_tokens":3,)"
            R"("completion_tokens":1,"total_tokens":4}})");
}

TEST(OpenAiResponse, EchoedPromptLogprobsStartWithNulls) {
  CompletionChoice c;
  c.text = "ab c";
  CompletionLogprobs lp;
  lp.tokens = {"ab", " c"};
  lp.token_logprobs = {std::nullopt, -0.25f};
  lp.top_logprobs = {std::nullopt, Alternatives{{" c", -0.25f}, {" d", -2.0f}}};
  lp.text_offset = {0, 2};
  c.logprobs = lp;
  c.finish_reason = "length";
  EXPECT_EQ(completion_json(kMeta, {c}, OpenAiUsage{2, 0}),
            R"({"object":"text_completion","id":"","created":1700000000,"model":"m",)"
            R"("system_fingerprint":"3.3.6-dev0-native","choices":[{"index":0,"text":"ab c",)"
            R"("logprobs":{"tokens":["ab"," c"],"token_logprobs":[null,-0.25],)"
            R"("top_logprobs":[null,{" c":-0.25," d":-2.0}],"text_offset":[0,2]},)"
            R"("finish_reason":"length"}],"usage":{"prompt_tokens":2,"completion_tokens":0,)"
            R"("total_tokens":2}})");
}

TEST(OpenAiResponse, Errors) {
  EXPECT_EQ(openai_error_json(validation_error("bad")),
            R"({"error":{"message":"Input validation error: bad","type":"validation",)"
            R"("param":null,"code":null},"error_type":"validation"})");
  EXPECT_EQ(openai_stream_error_sse("boom"),
            "data:{\"error\":{\"message\":\"boom\",\"http_status_code\":422}}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(OpenAiResponse, ChatTokenize) {
  TokenizeEntry e{1, "<|im_start|>", 0, 0};
  EXPECT_EQ(chat_tokenize_json({e}, "<|im_start|>"),
            R"({"tokenize_response":[{"id":1,"text":"<|im_start|>","start":0,"stop":0}],)"
            R"("templated_text":"<|im_start|>"})");
}

}  // namespace
}  // namespace lm
