// The TokenSinks of the OpenAI routes: one OpenAiChoiceSink per choice (a chat choice, or one
// completion of one prompt), all reporting to the request's OpenAiCall, which streams chunks as
// they come (then the usage chunk and [DONE]) or answers once every choice is in. Sinks run on
// the engine thread; the call's state is guarded by its mutex.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/token_sink.h"
#include "server/openai/openai_response.h"
#include "server/openai/tool_calls_stream.h"
#include "server/state/server_state.h"
#include "server/text/sequence_text.h"
#include "server/text/stop_text_filter.h"
#include "server/tgi/generation_sinks.h"

namespace lm {

enum class OpenAiKind { kChat, kCompletion };

class OpenAiCall {
 public:
  struct Settings {
    OpenAiKind kind = OpenAiKind::kChat;
    bool stream = false;
    bool include_usage = false;   // chat streams: a last chunk with the usage
    bool logprobs = false;        // chat: report logprobs (completions: when top_n was asked)
    bool tools = false;           // chat: the output is a tool-call object (chat_tools.h)
    bool parallel_tools = false;  // chat tools: or an array of them (ChatRequest::parallel_calls)
    // Completions' max_tokens 0 with echo: each choice ran for one token, which is not shown.
    bool prompt_only = false;
    OpenAiMeta meta;
    size_t compute_characters = 0;
    size_t num_choices = 1;
  };
  // A finished choice.
  struct Choice {
    ChatChoice chat;
    CompletionChoice completion;
    uint32_t prompt_tokens = 0;  // counted once per prompt
    uint32_t completion_tokens = 0;
  };

  OpenAiCall(ServerState& state, std::shared_ptr<ResponseStream> response,
             std::shared_ptr<ConcurrencyPermit> permit, RequestClock clock, Settings settings);
  // Ends a started stream that never completed (the client went away).
  ~OpenAiCall();

  // Starts the SSE response (stream) before any choice runs.
  void start_stream();
  // A choice joined the running batch: the first one ends the request's queue time.
  void scheduled();
  // A choice's first token: the first one ends the request's prefill (its trace's).
  void first_token() const { clock_.mark_first_token(); }
  void write(const std::string& sse);
  void choice_done(size_t slot, Choice choice);
  // The request failed (the engine, or a submit): an error answer or stream event, once.
  void fail(const std::string& message);
  bool cancelled() const;

  const Settings& settings() const { return settings_; }
  ServerState& state() { return state_; }

 private:
  void answer();  // all choices in; mutex held

  ServerState& state_;
  std::shared_ptr<ResponseStream> response_;
  std::shared_ptr<ConcurrencyPermit> permit_;
  RequestClock clock_;
  Settings settings_;
  mutable std::mutex mutex_;
  std::vector<std::optional<Choice>> choices_;
  size_t num_done_ = 0;
  bool failed_ = false;
  bool stream_started_ = false;
  bool finished_ = false;  // answered, or the stream ended
};

class OpenAiChoiceSink : public TokenSink {
 public:
  struct Options {
    size_t slot = 0;     // position among the call's choices
    uint32_t index = 0;  // the choice's `index`
    std::vector<std::string> stop;
    // Completions with echo: the prompt, shown before the text (with logprobs, its tokens'
    // entries come first: the engine request asked for prompt logprobs).
    std::string echo;
    bool count_prompt = true;  // false for the 2nd..nth choice of the same prompt
  };
  OpenAiChoiceSink(std::shared_ptr<OpenAiCall> call, SequenceText text, Options options);
  bool on_token(const TokenEvent& event) override;
  void on_error(const std::string& message) override;
  bool cancelled() const override { return call_->cancelled(); }
  void on_scheduled() override { call_->scheduled(); }

 private:
  ChatTokenLogprob chat_logprob(const SequenceText::Step& step) const;
  // Completions with echo: the prompt's logprob entries, from the first token's prompt scores.
  CompletionLogprobs prompt_logprobs(const TokenEvent& first) const;
  // Settings::prompt_only: answers with the echoed prompt (and its logprobs) once the token comes.
  bool finish_prompt_only(const TokenEvent& event);
  // Tool mode, streamed: this token's text as tool-call (or, at the end, content) chunks.
  void stream_tool_text(const std::string& text, std::optional<FinishReason> finish);
  // Tool mode: the finished choice's message from the whole generated text.
  void set_tool_result(ChatChoice& choice) const;

  std::shared_ptr<OpenAiCall> call_;
  SequenceText text_;
  StopTextFilter filter_;
  Options options_;
  std::vector<ChatTokenLogprob> chat_logprobs_;
  CompletionLogprobs completion_logprobs_;
  ToolCallsStream tool_stream_;
  InterTokenTimer inter_token_;
  bool echo_sent_ = false;
  size_t shown_characters_ = 0;  // the choice's text so far (echo included), in characters
  bool done_ = false;
};

}  // namespace lm
