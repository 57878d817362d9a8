#include "server/openai/openai_sinks.h"

#include "base/utf8.h"
#include "server/openai/completion_logprobs.h"
#include "server/tgi/generate_response.h"

namespace lm {

OpenAiCall::OpenAiCall(ServerState& state, std::shared_ptr<ResponseStream> response,
                       std::shared_ptr<ConcurrencyPermit> permit, RequestClock clock,
                       Settings settings)
    : state_(state),
      response_(std::move(response)),
      permit_(std::move(permit)),
      clock_(clock),
      settings_(std::move(settings)),
      choices_(settings_.num_choices) {}

OpenAiCall::~OpenAiCall() {
  if (stream_started_ && !finished_) response_->finish();
}

void OpenAiCall::start_stream() {
  stream_started_ = true;
  response_->start_stream(
      200, stream_response_headers(state_.compute_type, settings_.compute_characters));
}

void OpenAiCall::scheduled() {
  std::lock_guard<std::mutex> lock(mutex_);
  clock_.mark_scheduled();
}

void OpenAiCall::write(const std::string& sse) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failed_) response_->write(sse);
}

bool OpenAiCall::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_ || response_->closed();
}

void OpenAiCall::fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) return;
  failed_ = finished_ = true;
  permit_.reset();         // before the answer is sent (see StreamSink::on_token)
  state_.healthy = false;  // TGI: a generation error marks the backend unhealthy
  state_.metrics.increment("tgi_request_failure", "err=\"generation\"");
  const ApiError error = generation_error(message);
  trace_failure(clock_, error);
  if (settings_.stream) {
    response_->write(openai_stream_error_sse(error.error));
    response_->write(std::string(kSseDone));
    response_->finish();
    return;
  }
  response_->respond(
      {error.status, {{"Content-Type", "application/json"}}, openai_error_json(error)});
}

void OpenAiCall::choice_done(size_t slot, Choice choice) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_ || choices_[slot]) return;
  choices_[slot] = std::move(choice);
  if (++num_done_ == choices_.size()) {
    finished_ = true;
    answer();
  }
}

void OpenAiCall::answer() {
  permit_.reset();  // before the answer is sent (see StreamSink::on_token)
  OpenAiUsage usage;
  for (const auto& c : choices_) {
    usage.prompt_tokens += c->prompt_tokens;
    usage.completion_tokens += c->completion_tokens;
  }
  record_success(state_.metrics, clock_, usage.completion_tokens);
  // Before the response ends: a drained server then finds the spans queued for its flush.
  trace_success(clock_, usage.prompt_tokens, usage.completion_tokens, std::nullopt);
  if (settings_.stream) {
    if (settings_.kind == OpenAiKind::kChat && settings_.include_usage)
      response_->write(sse_data(chat_usage_chunk_json(settings_.meta, usage)));
    response_->write(std::string(kSseDone));
    response_->finish();
    return;
  }
  std::string body;
  if (settings_.kind == OpenAiKind::kChat) {
    std::vector<ChatChoice> chat;
    for (auto& c : choices_) chat.push_back(std::move(c->chat));
    body = chat_completion_json(settings_.meta, chat, usage);
  } else {
    std::vector<CompletionChoice> completions;
    for (auto& c : choices_) completions.push_back(std::move(c->completion));
    body = completion_json(settings_.meta, completions, usage);
  }
  HttpResponse out;
  out.headers = generate_response_headers(state_.compute_type, settings_.compute_characters,
                                          request_timings(clock_), usage.prompt_tokens,
                                          usage.completion_tokens);
  out.body = std::move(body);
  response_->respond(std::move(out));
}

OpenAiChoiceSink::OpenAiChoiceSink(std::shared_ptr<OpenAiCall> call, SequenceText text,
                                   Options options)
    : call_(std::move(call)),
      text_(std::move(text)),
      filter_(options.stop),
      options_(std::move(options)),
      tool_stream_(call_->settings().parallel_tools),
      shown_characters_(utf8_length(options_.echo)) {}

ChatTokenLogprob OpenAiChoiceSink::chat_logprob(const SequenceText::Step& step) const {
  ChatTokenLogprob lp;
  lp.token = step.token.text;
  lp.logprob = step.token.logprob;
  for (const auto& alt : step.top_tokens) lp.top_logprobs.push_back({alt.text, alt.logprob});
  return lp;
}

CompletionLogprobs OpenAiChoiceSink::prompt_logprobs(const TokenEvent& first) const {
  return echo_logprobs(*call_->state().tokenizer, options_.echo, text_.prompt_ids(), first.token);
}

bool OpenAiChoiceSink::finish_prompt_only(const TokenEvent& event) {
  done_ = true;
  call_->first_token();
  const OpenAiCall::Settings& settings = call_->settings();
  CompletionChoice c;
  c.index = options_.index;
  c.text = options_.echo;
  if (settings.logprobs) c.logprobs = prompt_logprobs(event);
  c.finish_reason = finish_reason_name(FinishReason::kLength);
  if (settings.stream) {
    call_->write(
        sse_data(completion_chunk_json(settings.meta, c, OpenAiUsage{text_.input_length(), 0})));
  }
  OpenAiCall::Choice result;
  result.prompt_tokens = options_.count_prompt ? text_.input_length() : 0;
  result.completion = std::move(c);
  call_->choice_done(options_.slot, std::move(result));
  return false;
}

bool OpenAiChoiceSink::on_token(const TokenEvent& event) {
  if (done_) return false;
  if (call_->settings().prompt_only) return finish_prompt_only(event);
  const size_t offset_before = shown_characters_;
  SequenceText::Step step = text_.add(event);
  inter_token_.on_token(call_->state().metrics);
  if (text_.num_generated() == 1) call_->first_token();
  // Special tokens (the EOS) show as "" and never take part in stop strings.
  StopTextFilter::Output out = filter_.push(step.token.special ? "" : step.token.text);
  std::optional<FinishReason> finish = step.finish_reason;
  if (!finish && out.stopped) finish = FinishReason::kStopSequence;
  if (finish && !out.stopped) out.text += filter_.finish();
  shown_characters_ += utf8_length(out.text);

  const OpenAiCall::Settings& settings = call_->settings();
  const bool chat = settings.kind == OpenAiKind::kChat;
  std::optional<ChatTokenLogprob> chat_lp;
  if (chat && settings.logprobs) {
    chat_lp = chat_logprob(step);
    chat_logprobs_.push_back(*chat_lp);
  }
  // This chunk's entries (completions): with echo, the first one starts with the prompt's.
  CompletionLogprobs token_lp;
  if (!chat && settings.logprobs) {
    if (text_.num_generated() == 1 && !options_.echo.empty()) token_lp = prompt_logprobs(event);
    append_token_logprobs(token_lp, step.token, step.top_tokens, offset_before);
    append_logprobs(completion_logprobs_, token_lp);
  }

  if (settings.stream) {
    if (chat && settings.tools) {
      stream_tool_text(out.text, finish);
    } else if (chat) {
      ChatChunkChoice c;
      c.index = options_.index;
      c.content = out.text;
      c.logprob = chat_lp;
      if (finish) c.finish_reason = chat_finish_reason(*finish);
      call_->write(sse_data(chat_chunk_json(settings.meta, c)));
    } else {
      CompletionChoice c;
      c.index = options_.index;
      c.text = echo_sent_ ? out.text : options_.echo + out.text;
      echo_sent_ = true;
      if (settings.logprobs) c.logprobs = token_lp;
      // TGI: intermediate chunks say "", the last one the raw reason (eos_token kept).
      c.finish_reason = finish ? finish_reason_name(*finish) : "";
      std::optional<OpenAiUsage> usage;
      if (finish) usage = OpenAiUsage{text_.input_length(), text_.num_generated()};
      call_->write(sse_data(completion_chunk_json(settings.meta, c, usage)));
    }
  }
  if (!finish) return true;
  done_ = true;
  OpenAiCall::Choice result;
  result.prompt_tokens = options_.count_prompt ? text_.input_length() : 0;
  result.completion_tokens = text_.num_generated();
  if (chat) {
    result.chat.index = options_.index;
    result.chat.content = filter_.released();
    if (settings.logprobs) result.chat.logprobs = std::move(chat_logprobs_);
    result.chat.finish_reason = chat_finish_reason(*finish);
    if (settings.tools) set_tool_result(result.chat);
  } else {
    result.completion.index = options_.index;
    result.completion.text = options_.echo + filter_.released();
    if (settings.logprobs) result.completion.logprobs = std::move(completion_logprobs_);
    result.completion.finish_reason = chat_finish_reason(*finish);
  }
  call_->choice_done(options_.slot, std::move(result));
  return false;
}

void OpenAiChoiceSink::stream_tool_text(const std::string& text,
                                        std::optional<FinishReason> finish) {
  const OpenAiCall::Settings& settings = call_->settings();
  auto write_delta = [&](const ToolCallsStream::Delta& delta,
                         const std::optional<std::string>& finish_reason) {
    ChatToolCallDelta d;
    d.call_index = delta.call_idx;
    if (delta.name) d.id = std::to_string(delta.call_idx);  // TGI's id "0"; then "1", ...
    d.name = delta.name;
    d.arguments = delta.arguments;
    call_->write(sse_data(chat_tool_chunk_json(settings.meta, options_.index, d, finish_reason)));
  };
  for (const ToolCallsStream::Delta& delta : tool_stream_.push(text))
    write_delta(delta, std::nullopt);
  ChatChunkChoice c;
  c.index = options_.index;
  if (!finish) {
    // no_tool: its content streams as text.
    c.content = tool_stream_.take_content();
    if (!c.content.empty()) call_->write(sse_data(chat_chunk_json(settings.meta, c)));
    return;
  }
  const std::vector<ToolCallsStream::Delta> last = tool_stream_.finish();
  if (!last.empty()) {
    const bool complete =
        parse_tool_calls(tool_stream_.text(), settings.parallel_tools).has_value();
    for (size_t i = 0; i + 1 < last.size(); ++i) write_delta(last[i], std::nullopt);
    write_delta(last.back(),
                complete ? std::string("tool_calls") : std::string(chat_finish_reason(*finish)));
    return;
  }
  // no_tool (the rest of its content) or no call object at all (the text as it is).
  c.content = tool_stream_.is_no_tool() ? tool_stream_.take_content() : tool_stream_.text();
  c.finish_reason = chat_finish_reason(*finish);
  call_->write(sse_data(chat_chunk_json(settings.meta, c)));
}

void OpenAiChoiceSink::set_tool_result(ChatChoice& choice) const {
  const std::optional<std::vector<ParsedToolCall>> parsed =
      parse_tool_calls(choice.content, call_->settings().parallel_tools);
  // NOTE: TGI answers 422 when the text is no call object (max_tokens cut it); here the text
  // (a no_tool's content so far) is returned as content with its finish reason.
  if (!parsed) {
    ToolCallStream cut;  // a no_tool answer cut short still gives its text so far
    cut.push(choice.content);
    if (cut.is_no_tool()) choice.content = cut.take_content();
    return;
  }
  if (parsed->front().no_tool()) {  // only ever the sole call (parse_tool_calls)
    choice.content = parsed->front().content;
    return;
  }
  for (size_t i = 0; i < parsed->size(); ++i) {
    const ParsedToolCall& call = (*parsed)[i];
    choice.tool_calls.push_back(ChatToolCall{std::to_string(i), call.name, call.arguments});
  }
  choice.content.clear();
  choice.finish_reason = "tool_calls";
}

void OpenAiChoiceSink::on_error(const std::string& message) {
  done_ = true;
  call_->fail(message);
}

}  // namespace lm
