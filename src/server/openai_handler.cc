#include "server/openai_handler.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "server/chat_prompt.h"
#include "server/generate_handler.h"
#include "server/generate_response.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/openai_sinks.h"
#include "server/token_offsets.h"

namespace lm {
namespace {

void respond_json_error(ServerState& state, ResponseStream& response, const ApiError& error,
                        const char* metric_label) {
  if (metric_label != nullptr) state.metrics.increment("tgi_request_failure", metric_label);
  response.respond(
      {error.status, {{"Content-Type", "application/json"}}, openai_error_json(error)});
}

void respond_rejection(ResponseStream& response, const BodyRejection& rejection) {
  response.respond(
      {rejection.status, {{"Content-Type", "application/json"}}, openai_rejection_json(rejection)});
}

std::string system_fingerprint(const InfoBody& info) {
  return info.version + "-" + info.docker_label.value_or("native");
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One generation to run: a prompt and the choice it answers.
struct ChoiceJob {
  const ValidGenerateRequest* valid = nullptr;
  std::vector<int32_t> ids;
  uint64_t seed = 0;
  OpenAiChoiceSink::Options options;
};

// n choices of one validated prompt: the first keeps the request's seed, the others draw theirs
// from it (as TGI does for best_of), so a seeded request is reproducible.
void add_choices(std::vector<ChoiceJob>& jobs, const ValidGenerateRequest& valid,
                 const std::vector<int32_t>& ids, uint64_t n, uint32_t first_index,
                 const std::string& echo) {
  std::mt19937_64 seeds(valid.seed);
  for (uint64_t j = 0; j < n; ++j) {
    ChoiceJob job;
    job.valid = &valid;
    job.ids = ids;
    job.seed = j == 0 ? valid.seed : seeds();
    job.options.slot = jobs.size();
    job.options.index = first_index + static_cast<uint32_t>(j);
    job.options.stop = valid.stop;
    job.options.echo = echo;
    job.options.count_prompt = j == 0;
    jobs.push_back(std::move(job));
  }
}

void run_jobs(ServerState& state, std::shared_ptr<ResponseStream> response,
              std::shared_ptr<ConcurrencyPermit> permit, RequestClock clock,
              OpenAiCall::Settings settings, std::vector<ChoiceJob> jobs, float presence_penalty) {
  settings.num_choices = jobs.size();
  const bool stream = settings.stream;
  clock.enqueued = Clock::now();
  auto call = std::make_shared<OpenAiCall>(state, std::move(response), std::move(permit), clock,
                                           std::move(settings));
  if (stream) call->start_stream();
  for (ChoiceJob& job : jobs) {
    const ValidGenerateRequest& valid = *job.valid;
    state.metrics.observe("tgi_request_input_length", static_cast<double>(job.ids.size()));
    state.metrics.observe("tgi_request_max_new_tokens", valid.max_new_tokens);
    EngineRequest engine_request;
    engine_request.prompt_ids = job.ids;
    // NOTE: OpenAI's presence_penalty goes to the engine's own presence penalty (logit -= penalty
    // once a token occurred). TGI maps it to repetition_penalty = presence_penalty + 2, which turns
    // OpenAI's default 0 into a strong repetition penalty and -2 into an error: a plain bug.
    engine_request.sampling = sampling_params_of(valid, presence_penalty);
    engine_request.sampling.seed = job.seed;
    engine_request.max_new_tokens =
        std::max<uint32_t>(valid.max_total_new_tokens, valid.max_new_tokens);
    // Stop strings are handled by the sink's StopTextFilter (matched on the shown text).
    SequenceText text(*state.tokenizer, job.ids, SequenceTextOptions{valid.inputs, false, {}});
    auto sink = std::make_shared<OpenAiChoiceSink>(call, std::move(text), std::move(job.options));
    if (Status s = state.engine->submit(std::move(engine_request), sink); !s.ok()) {
      sink->on_error(s.error().message);
      return;
    }
  }
}

}  // namespace

void handle_chat_completions(ServerState& state, HttpRequest request,
                             std::shared_ptr<ResponseStream> response) {
  RequestClock clock{Clock::now(), {}, {}};
  auto parsed = parse_chat_request(request.body);
  if (auto* rejection = std::get_if<BodyRejection>(&parsed)) {
    return respond_rejection(*response, *rejection);
  }
  ChatRequest chat = std::move(std::get<ChatRequest>(parsed));
  state.metrics.increment("tgi_request_count");
  const char* kValidation = "err=\"validation\"";
  if (auto error = validate_chat_request(chat, state.limits, state.info.max_client_batch_size)) {
    return respond_json_error(state, *response, *error, kValidation);
  }
  const ChatTemplateContext context{state.chat_template.get(), state.bos_token, state.eos_token};
  auto prompt_or = render_chat_prompt(context, *state.tokenizer, chat.messages);
  if (auto* error = std::get_if<ApiError>(&prompt_or)) {
    return respond_json_error(state, *response, *error, "err=\"template_error\"");
  }
  ChatPrompt prompt = std::move(std::get<ChatPrompt>(prompt_or));
  auto permit_or = ConcurrencyPermit::try_acquire(state, static_cast<int64_t>(chat.n));
  if (!permit_or)
    return respond_json_error(state, *response, overloaded_error(), "err=\"overloaded\"");
  auto permit = std::make_shared<ConcurrencyPermit>(std::move(*permit_or));

  ParsedGenerateRequest generate{prompt.text, chat_generate_parameters(chat), chat.stream};
  auto valid_or = validate_parameters(std::move(generate), state.limits, chat.stream);
  if (auto* error = std::get_if<ApiError>(&valid_or)) {
    return respond_json_error(state, *response, *error, kValidation);
  }
  ValidGenerateRequest valid = std::move(std::get<ValidGenerateRequest>(valid_or));
  if (auto error = validate_lengths(valid, prompt.ids.size(), state.limits)) {
    return respond_json_error(state, *response, *error, kValidation);
  }
  if (prompt.ids.size() > valid.input_length)
    prompt.ids.erase(prompt.ids.begin(), prompt.ids.end() - valid.input_length);

  OpenAiCall::Settings settings;
  settings.kind = OpenAiKind::kChat;
  settings.stream = chat.stream;
  settings.include_usage = chat.include_usage;
  settings.logprobs = chat.logprobs;
  settings.meta = {chat.model && *chat.model != "tgi" ? *chat.model : state.info.model_id,
                   system_fingerprint(state.info), unix_seconds()};
  settings.compute_characters = count_characters(prompt.text);
  std::vector<ChoiceJob> jobs;
  add_choices(jobs, valid, prompt.ids, chat.n, 0, "");
  run_jobs(state, std::move(response), std::move(permit), clock, std::move(settings),
           std::move(jobs), chat.presence_penalty.value_or(0.0f));
}

void handle_completions(ServerState& state, HttpRequest request,
                        std::shared_ptr<ResponseStream> response) {
  RequestClock clock{Clock::now(), {}, {}};
  auto parsed = parse_completion_request(request.body);
  if (auto* rejection = std::get_if<BodyRejection>(&parsed)) {
    return respond_rejection(*response, *rejection);
  }
  CompletionRequest completion = std::move(std::get<CompletionRequest>(parsed));
  state.metrics.increment("tgi_request_count");
  const char* kValidation = "err=\"validation\"";
  if (auto error =
          validate_completion_request(completion, state.limits, state.info.max_client_batch_size,
                                      state.info.max_client_batch_size)) {
    return respond_json_error(state, *response, *error, kValidation);
  }
  const auto num_generations = static_cast<int64_t>(completion.prompts.size() * completion.n);
  auto permit_or = ConcurrencyPermit::try_acquire(state, num_generations);
  if (!permit_or)
    return respond_json_error(state, *response, overloaded_error(), "err=\"overloaded\"");
  auto permit = std::make_shared<ConcurrencyPermit>(std::move(*permit_or));

  // Every prompt is validated as its own generation (TGI), then all run together.
  std::vector<ValidGenerateRequest> valid(completion.prompts.size());
  std::vector<std::vector<int32_t>> ids(completion.prompts.size());
  size_t compute_characters = 0;
  for (size_t i = 0; i < completion.prompts.size(); ++i) {
    ParsedGenerateRequest generate{completion.prompts[i],
                                   completion_generate_parameters(completion), completion.stream};
    auto valid_or = validate_parameters(std::move(generate), state.limits, completion.stream);
    if (auto* error = std::get_if<ApiError>(&valid_or)) {
      return respond_json_error(state, *response, *error, kValidation);
    }
    valid[i] = std::move(std::get<ValidGenerateRequest>(valid_or));
    ids[i] = state.tokenizer->encode(valid[i].inputs, /*add_special_tokens=*/true);
    if (auto error = validate_lengths(valid[i], ids[i].size(), state.limits)) {
      return respond_json_error(state, *response, *error, kValidation);
    }
    if (ids[i].size() > valid[i].input_length)
      ids[i].erase(ids[i].begin(), ids[i].end() - valid[i].input_length);
    compute_characters += count_characters(valid[i].inputs);
  }
  OpenAiCall::Settings settings;
  settings.kind = OpenAiKind::kCompletion;
  settings.stream = completion.stream;
  settings.logprobs = completion.logprobs.has_value();
  settings.meta = {state.info.model_id, system_fingerprint(state.info), unix_seconds()};
  settings.compute_characters = compute_characters;
  std::vector<ChoiceJob> jobs;
  for (size_t i = 0; i < valid.size(); ++i) {
    add_choices(jobs, valid[i], ids[i], completion.n, static_cast<uint32_t>(i * completion.n),
                completion.echo ? valid[i].inputs : std::string());
  }
  run_jobs(state, std::move(response), std::move(permit), clock, std::move(settings),
           std::move(jobs), completion.presence_penalty.value_or(0.0f));
}

void handle_chat_tokenize(ServerState& state, HttpRequest request,
                          std::shared_ptr<ResponseStream> response) {
  auto parsed = parse_chat_request(request.body);
  if (auto* rejection = std::get_if<BodyRejection>(&parsed)) {
    return respond_rejection(*response, *rejection);
  }
  const ChatRequest chat = std::move(std::get<ChatRequest>(parsed));
  if (auto error = validate_chat_request(chat, state.limits, state.info.max_client_batch_size)) {
    return respond_json_error(state, *response, *error, nullptr);
  }
  const ChatTemplateContext context{state.chat_template.get(), state.bos_token, state.eos_token};
  auto prompt_or = render_chat_prompt(context, *state.tokenizer, chat.messages);
  if (auto* error = std::get_if<ApiError>(&prompt_or)) {
    return respond_json_error(state, *response, *error, nullptr);
  }
  const ChatPrompt& prompt = std::get<ChatPrompt>(prompt_or);
  response->respond(
      {200,
       {{"Content-Type", "application/json"}},
       chat_tokenize_json(token_offsets(*state.tokenizer, prompt.text, prompt.ids), prompt.text)});
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
