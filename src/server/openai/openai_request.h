// Request bodies of the OpenAI-compatible routes (/v1/chat/completions, /v1/completions,
// /chat_tokenize): parsing into plain structs (malformed or wrongly typed JSON is a
// BodyRejection), validation with clear messages, and TGI's mapping onto generate parameters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/admission/admission_request.h"
#include "server/admission/chat_prompt.h"
#include "server/admission/validation.h"
#include "server/openai/chat_tools.h"
#include "server/wire/api_error.h"
#include "server/wire/body_rejection.h"

namespace lm {

struct ChatRequest {
  std::optional<std::string> model;
  std::vector<ChatMessage> messages;
  std::optional<float> frequency_penalty;
  std::optional<float> presence_penalty;
  // logit_bias: {"token id": bias}; kept as given, checked by validate_*_request.
  std::vector<std::pair<std::string, double>> logit_bias;
  std::optional<float> temperature;
  std::optional<float> top_p;
  bool logprobs = false;
  std::optional<uint32_t> top_logprobs;
  std::optional<uint32_t> max_tokens;  // max_tokens or max_completion_tokens
  uint64_t n = 1;
  std::vector<std::string> stop;  // a string or a list
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::optional<uint64_t> seed;
  bool has_tools = false;       // non-null `tools` (even [])
  bool uses_tools = false;      // tool_choice selects at least one tool (see chat_tools.h)
  std::vector<ChatTool> tools;  // in the sender's order, parameter key order kept
  ToolChoice tool_choice;       // absent or null: auto
  std::string tool_prompt;      // TGI's `tool_prompt`; absent or "": TGI's default
  // `parallel_tool_calls` as sent (absent: nullopt). TGI ignores it and its clients never send
  // it, so only an explicit true changes anything (see parallel_calls).
  std::optional<bool> parallel_tool_calls;
  // Parallel mode: parallel_tool_calls true and tool_choice auto or required with tools in use
  // (none of them named no_tool); the answer may then be an array of calls (chat_tools.h
  // parallel_tool_grammar_schema).
  bool parallel_calls = false;
  bool has_response_format = false;  // non-null `response_format`
  // What `response_format` asks for as TGI's grammar (nullopt: none, or {"type":"text"}).
  std::optional<GrammarParameter> response_format;
};

struct CompletionRequest {
  std::optional<std::string> model;
  std::vector<std::string> prompts;  // a string or a list of strings
  // Or (OpenAI's other shapes; TGI takes strings only) a list of token ids, or a list of such
  // lists: each a prompt of exactly those tokens.
  std::vector<std::vector<int32_t>> prompt_ids;
  std::optional<uint32_t> max_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<float> repetition_penalty;
  std::optional<float> frequency_penalty;
  std::optional<float> presence_penalty;
  // logit_bias: {"token id": bias}; kept as given, checked by validate_*_request.
  std::vector<std::pair<std::string, double>> logit_bias;
  std::vector<std::string> stop;
  bool stream = false;
  std::optional<uint64_t> seed;
  bool has_suffix = false;
  bool echo = false;
  std::optional<uint32_t> logprobs;  // number of top alternatives per token (legacy format)
  uint64_t n = 1;

  size_t num_prompts() const { return prompts.size() + prompt_ids.size(); }
};

std::variant<ChatRequest, BodyRejection> parse_chat_request(std::string_view body);
std::variant<CompletionRequest, BodyRejection> parse_completion_request(std::string_view body);

// Which request /invocations holds: the first of generate (`inputs`), chat (`messages`) and
// completion (`prompt`) whose key the body has; kNone for other JSON. Malformed JSON is kGenerate,
// so the generate parser rejects it with serde's message.
enum class InvocationShape { kGenerate, kChat, kCompletion, kNone };
InvocationShape invocation_shape(std::string_view body);

// Checks that need no tokenizer, in order: tools with response_format (TGI's tool_error), tools,
// messages, n, top_logprobs,
// presence_penalty. `max_n` bounds n (the server's --max-client-batch-size).
std::optional<ApiError> validate_chat_request(const ChatRequest& request,
                                              const ValidationLimits& limits, uint64_t max_n);
// Completions: echo with logprobs returns the prompt's logprobs, computed only when
// `prompt_logprobs_enabled` (--enable-prefill-logprobs); otherwise a 422 naming the flag.
std::optional<ApiError> validate_completion_request(const CompletionRequest& request,
                                                    const ValidationLimits& limits, uint64_t max_n,
                                                    size_t max_prompts,
                                                    bool prompt_logprobs_enabled);

// TGI's mapping onto /generate parameters (spec §1.8, §1.9): temperature 0 is greedy and any
// other value (absent included) samples; top_p 1 means off here (TGI rejects it); details on.
// presence_penalty is not mapped (see openai_handler.cc). Completions' max_tokens 0 with echo
// (scoring the prompt only, as OpenAI's legacy API and vLLM allow) runs for 1 token: the prompt's
// pass samples it anyway, and the sink drops it.
GenerateParameters chat_generate_parameters(const ChatRequest& request);
GenerateParameters completion_generate_parameters(const CompletionRequest& request);

// The whole request as admission takes it: the mapped parameters, the messages (chat) or prompts
// (completions), n, streaming, OpenAI's presence penalty, and (completions' echo with logprobs)
// the prompt logprobs.
AdmissionRequest chat_admission_request(ChatRequest request);
// What the chat template gets for the request's tools (nullopt: no tools in use).
std::optional<ChatToolPrompt> chat_tool_prompt(const ChatRequest& request);
AdmissionRequest completion_admission_request(CompletionRequest request);

}  // namespace lm
