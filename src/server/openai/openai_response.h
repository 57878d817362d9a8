// Bodies of the OpenAI-compatible routes as TGI writes them (spec §1.8-1.10): chat completions
// and their SSE chunks, legacy completions and their chunks, /chat_tokenize, and the error
// bodies of these routes. Inputs are plain structs the handlers fill.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/finish_reason.h"
#include "server/tgi/info_response.h"
#include "server/wire/api_error.h"
#include "server/wire/body_rejection.h"

namespace lm {

// What every response object of one request repeats.
struct OpenAiMeta {
  std::string model;
  std::string system_fingerprint;  // "{version}-{docker_label or native}"
  int64_t created = 0;             // unix seconds
};

struct OpenAiUsage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
};

// Chat: finish reasons with eos_token renamed "stop" (stop_sequence kept, as TGI).
const char* chat_finish_reason(FinishReason reason);

struct TokenAlternative {
  std::string token;
  float logprob = 0;
};

// One generated token in a chat `logprobs.content` list.
struct ChatTokenLogprob {
  std::string token;
  float logprob = 0;
  std::vector<TokenAlternative> top_logprobs;
};

// A tool call in a chat message (OpenAI's shape; TGI's id "0" and "description": null).
struct ChatToolCall {
  std::string id = "0";
  std::string name;
  std::string arguments;  // JSON text, sent as a string
};

struct ChatChoice {
  uint32_t index = 0;
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // non-empty: "content": null and "tool_calls": them
  std::optional<std::vector<ChatTokenLogprob>> logprobs;  // null unless requested
  std::string finish_reason;
};
std::string chat_completion_json(const OpenAiMeta& meta, const std::vector<ChatChoice>& choices,
                                 const OpenAiUsage& usage);

struct ChatChunkChoice {
  uint32_t index = 0;
  std::string content;
  std::optional<ChatTokenLogprob> logprob;  // this token's, when requested
  std::optional<std::string> finish_reason;
};
// One token: {"object":"chat.completion.chunk",...,"usage":null}.
std::string chat_chunk_json(const OpenAiMeta& meta, const ChatChunkChoice& choice);
// One tool-call delta: the first of a call carries id, type and the name; the others only
// argument text. Each carries its call's `index` (parallel calls: 0, 1, ...; OpenAI's shape).
struct ChatToolCallDelta {
  uint32_t call_index = 0;
  std::optional<std::string> id;  // with the name
  std::optional<std::string> name;
  std::string arguments;
};
std::string chat_tool_chunk_json(const OpenAiMeta& meta, uint32_t index,
                                 const ChatToolCallDelta& delta,
                                 const std::optional<std::string>& finish_reason);
// stream_options.include_usage: the last chunk, "choices":[] with the usage.
std::string chat_usage_chunk_json(const OpenAiMeta& meta, const OpenAiUsage& usage);

// The legacy completions logprobs object (OpenAI's shape; TGI always sends null). One entry per
// token; an echoed prompt's first token has neither logprob nor alternatives (null).
struct CompletionLogprobs {
  std::vector<std::string> tokens;
  std::vector<std::optional<float>> token_logprobs;
  // Written as {token: logprob} maps.
  std::vector<std::optional<std::vector<TokenAlternative>>> top_logprobs;
  std::vector<size_t> text_offset;  // characters of the choice's text before the token
};

struct CompletionChoice {
  uint32_t index = 0;
  std::string text;
  std::optional<CompletionLogprobs> logprobs;
  std::string finish_reason;  // "" on intermediate stream chunks
};
std::string completion_json(const OpenAiMeta& meta, const std::vector<CompletionChoice>& choices,
                            const OpenAiUsage& usage);
// A stream chunk: intermediate ones have no usage key (and TGI's key order), the last one of a
// prompt carries that prompt's usage.
std::string completion_chunk_json(const OpenAiMeta& meta, const CompletionChoice& choice,
                                  const std::optional<OpenAiUsage>& usage);

// POST /chat_tokenize: {"tokenize_response":[...],"templated_text":"..."}.
std::string chat_tokenize_json(const std::vector<TokenizeEntry>& tokens,
                               const std::string& templated_text);

// Error bodies of these routes, in the shape the OpenAI SDKs read (an `error` object with
// message/type/param/code) plus TGI's top-level error_type for TGI's own clients.
std::string openai_error_json(const ApiError& error);
// An extractor rejection (malformed or wrongly shaped JSON) with its status kept.
std::string openai_rejection_json(const BodyRejection& rejection);
// An error inside an OpenAI stream (TGI: always claims 422), then the stream ends with [DONE].
std::string openai_stream_error_sse(std::string_view message);

// `data:{json}\n\n` and the terminator of every OpenAI stream.
// NOTE: the spec writes TGI's terminator as `data:[DONE]`; SSE readers see the same event with or
// without the space, but huggingface_hub's chat stream only recognizes `data: [DONE]` (with
// `data:[DONE]` it fails with a JSONDecodeError), so the space is sent.
std::string sse_data(std::string_view json);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace lm
