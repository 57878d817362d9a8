// The OpenAI routes (see openai_handler.h): one flow, serve_openai, over each route's traits (its
// parser, field rules, mapping onto admission, response settings); one sink per choice.
#include "server/openai/openai_handler.h"

#include <algorithm>
#include <chrono>

#include "server/admission/admission.h"
#include "server/admission/chat_prompt.h"
#include "server/openai/openai_request.h"
#include "server/openai/openai_response.h"
#include "server/openai/openai_sinks.h"
#include "server/text/token_offsets.h"
#include "server/tgi/generate_handler.h"
#include "server/tgi/generate_response.h"
#include "server/tracing/request_trace.h"

namespace lm {
namespace {

// `clock` (null: not a traced route) gets the error on its trace.
void respond_json_error(ServerState& state, ResponseStream& response, const ApiError& error,
                        const char* metric_label, const RequestClock* clock = nullptr) {
  if (metric_label != nullptr) state.metrics.increment("tgi_request_failure", metric_label);
  if (clock != nullptr) trace_failure(*clock, error);
  response.respond(
      {error.status, {{"Content-Type", "application/json"}}, openai_error_json(error)});
}

void respond_rejection(ResponseStream& response, const BodyRejection& rejection) {
  response.respond(
      {rejection.status, {{"Content-Type", "application/json"}}, openai_rejection_json(rejection)});
}

// TGI's version and docker label; we have no docker label.
std::string system_fingerprint() { return std::string(kRouterVersion) + "-native"; }

constexpr const char* kValidation = "err=\"validation\"";

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Runs an admitted request: one OpenAiChoiceSink per generation, all reporting to one call.
// Choice `index`es run prompt-major (prompt i's n choices are i*n .. i*n+n-1); `echo` shows each
// prompt before its text (completions).
void run_admitted(ServerState& state, std::shared_ptr<ResponseStream> response, RequestClock clock,
                  OpenAiCall::Settings settings, Admission& admission, bool echo) {
  settings.num_choices = admission.generations.size();
  for (const AdmittedPrompt& prompt : admission.prompts)
    settings.compute_characters += count_characters(prompt.valid.inputs);
  const bool stream = settings.stream;
  const size_t choices_per_prompt = admission.generations.size() / admission.prompts.size();
  clock.mark_enqueued();
  release_permit_on_hang_up(admission, *response);
  auto call = std::make_shared<OpenAiCall>(state, std::move(response), admission.permit, clock,
                                           std::move(settings));
  if (stream) call->start_stream();
  submit_all(state, admission, [&](const AdmittedGeneration& generation) {
    const AdmittedPrompt& prompt = admission.prompts[generation.prompt_idx];
    OpenAiChoiceSink::Options options;
    options.slot = generation.prompt_idx * choices_per_prompt + generation.choice_idx;
    options.index = static_cast<uint32_t>(options.slot);
    options.stop = prompt.valid.stop;
    options.echo = echo ? prompt.valid.inputs : std::string();
    options.count_prompt = generation.choice_idx == 0;
    // Stop strings are handled by the sink's StopTextFilter (matched on the shown text).
    SequenceText text(*state.tokenizer, prompt.ids,
                      SequenceTextOptions{prompt.valid.inputs, false, {}});
    return std::make_shared<OpenAiChoiceSink>(call, std::move(text), std::move(options));
  });
}

// What differs between the two generation routes; everything else is one flow (serve_openai).
struct ChatRoute {
  using Request = ChatRequest;
  static constexpr const char* kSpanName = "chat_completions";  // TGI's handler span
  static std::variant<ChatRequest, BodyRejection> parse(std::string_view body) {
    return parse_chat_request(body);
  }
  static std::optional<ApiError> validate(const ChatRequest& chat, const ServerSettings& s) {
    return validate_chat_request(chat, s.limits, s.max_client_batch_size);
  }
  static AdmissionRequest admission_request(ChatRequest&& chat) {
    return chat_admission_request(std::move(chat));
  }
  static OpenAiCall::Settings settings(const ChatRequest& chat, const ServerSettings& s) {
    OpenAiCall::Settings out;
    out.kind = OpenAiKind::kChat;
    out.stream = chat.stream;
    out.include_usage = chat.include_usage;
    out.logprobs = chat.logprobs;
    out.tools = chat.uses_tools;
    out.parallel_tools = chat.parallel_calls;
    out.meta = {chat.model && *chat.model != "tgi" ? *chat.model : s.model_id, system_fingerprint(),
                unix_seconds()};
    return out;
  }
  static bool echo(const ChatRequest&) { return false; }
  static size_t num_prompts(const ChatRequest&) { return 1; }
};

struct CompletionRoute {
  using Request = CompletionRequest;
  static constexpr const char* kSpanName = "completions";
  static std::variant<CompletionRequest, BodyRejection> parse(std::string_view body) {
    return parse_completion_request(body);
  }
  static std::optional<ApiError> validate(const CompletionRequest& completion,
                                          const ServerSettings& s) {
    return validate_completion_request(completion, s.limits, s.max_client_batch_size,
                                       s.max_client_batch_size, s.enable_prefill_logprobs);
  }
  static AdmissionRequest admission_request(CompletionRequest&& completion) {
    return completion_admission_request(std::move(completion));
  }
  static OpenAiCall::Settings settings(const CompletionRequest& completion,
                                       const ServerSettings& s) {
    OpenAiCall::Settings out;
    out.kind = OpenAiKind::kCompletion;
    out.stream = completion.stream;
    out.logprobs = completion.logprobs.has_value();
    out.prompt_only = completion.echo && completion.max_tokens == 0u;
    out.meta = {s.model_id, system_fingerprint(), unix_seconds()};
    return out;
  }
  static bool echo(const CompletionRequest& completion) { return completion.echo; }
  static size_t num_prompts(const CompletionRequest& completion) {
    return completion.num_prompts();
  }
};

// Parse (the route's shape), the route's own field rules, admission, then one sink per choice.
template <typename Route>
void serve_openai(ServerState& state, const HttpRequest& request,
                  std::shared_ptr<ResponseStream> response) {
  RequestClock clock = start_request_clock(state, request, Route::kSpanName);
  auto parsed = Route::parse(request.body);
  if (auto* rejection = std::get_if<BodyRejection>(&parsed)) {
    trace_failure(clock, {rejection->status, rejection->body, ""});
    return respond_rejection(*response, *rejection);
  }
  typename Route::Request& body = std::get<typename Route::Request>(parsed);
  state.metrics.increment("tgi_request_count");
  if (auto error = Route::validate(body, state.settings)) {
    return respond_json_error(state, *response, *error, kValidation, &clock);
  }
  // NOTE: TGI counts the route once and each prompt's generation again (a chat counts twice).
  state.metrics.increment("tgi_request_count", "", static_cast<double>(Route::num_prompts(body)));
  // The response's settings first: the request then moves into admission (messages, prompts).
  OpenAiCall::Settings settings = Route::settings(body, state.settings);
  const bool echo = Route::echo(body);
  AdmissionRequest admission_request = Route::admission_request(std::move(body));
  if (clock.trace) clock.trace->set_parameters(debug_text(admission_request.parameters));
  auto admitted = admit(state, std::move(admission_request));
  if (auto* failure = std::get_if<AdmissionFailure>(&admitted)) {
    return respond_json_error(state, *response, failure->error, failure->metric_label, &clock);
  }
  run_admitted(state, std::move(response), clock, std::move(settings),
               std::get<Admission>(admitted), echo);
}

}  // namespace

void handle_chat_completions(ServerState& state, HttpRequest request,
                             std::shared_ptr<ResponseStream> response) {
  serve_openai<ChatRoute>(state, request, std::move(response));
}

void handle_completions(ServerState& state, HttpRequest request,
                        std::shared_ptr<ResponseStream> response) {
  serve_openai<CompletionRoute>(state, request, std::move(response));
}

void handle_chat_tokenize(ServerState& state, HttpRequest request,
                          std::shared_ptr<ResponseStream> response) {
  auto parsed = parse_chat_request(request.body);
  if (auto* rejection = std::get_if<BodyRejection>(&parsed)) {
    return respond_rejection(*response, *rejection);
  }
  const ChatRequest chat = std::move(std::get<ChatRequest>(parsed));
  state.metrics.increment("tgi_request_count");  // as TGI does, though nothing is generated
  if (auto error = ChatRoute::validate(chat, state.settings)) {
    return respond_json_error(state, *response, *error, nullptr);
  }
  const ChatTemplateContext context{state.chat_template.get(), state.bos_token, state.eos_token,
                                    state.tool_use_template.get()};
  const std::optional<ChatToolPrompt> tools = chat_tool_prompt(chat);
  auto prompt_or =
      render_chat_prompt(context, *state.tokenizer, chat.messages, tools ? &*tools : nullptr);
  if (auto* error = std::get_if<ApiError>(&prompt_or)) {
    return respond_json_error(state, *response, *error, nullptr);
  }
  const ChatPrompt& prompt = std::get<ChatPrompt>(prompt_or);
  response->respond({200,
                     {{"Content-Type", "application/json"}},
                     chat_tokenize_json(token_offsets(*state.tokenizer, prompt.text, prompt.ids,
                                                      /*add_special_tokens=*/false),
                                        prompt.text)});
}

void handle_invocations(ServerState& state, HttpRequest request,
                        std::shared_ptr<ResponseStream> response) {
  switch (invocation_shape(request.body)) {
    case InvocationShape::kGenerate:
      return handle_generate(state, std::move(request), std::move(response),
                             GenerateRoute::kCompat);
    case InvocationShape::kChat:
      return handle_chat_completions(state, std::move(request), std::move(response));
    case InvocationShape::kCompletion:
      return handle_completions(state, std::move(request), std::move(response));
    case InvocationShape::kNone:
      break;
  }
  response->respond(
      {422, {{"Content-Type", std::string(kTextPlain)}}, std::string(kSagemakerNoMatch)});
}

}  // namespace lm
