#include "server/generate_handler.h"

#include <algorithm>
#include <mutex>
#include <random>

#include "server/api_error.h"
#include "server/generate_response.h"
#include "server/generation_sinks.h"

namespace lm {
namespace {

void respond_error(ServerState& state, ResponseStream& response, const ApiError& error,
                   const char* metric_label) {
  if (metric_label != nullptr) state.metrics.increment("tgi_request_failure", metric_label);
  response.respond({error.status, {{"Content-Type", "application/json"}}, api_error_json(error)});
}

// TGI samples when do_sample is set or any warper is (and then reports the seed).
bool is_sampled(const ValidGenerateRequest& v) {
  return v.do_sample || v.temperature != 1.0f || v.top_k != 0 || v.top_p < 1.0f ||
         v.typical_p < 1.0f;
}

// Gathers the best_of candidates of one non-streamed request and answers once all are in.
struct CandidateCollector {
  CandidateCollector(ServerState& s, std::shared_ptr<ResponseStream> r,
                     std::shared_ptr<ConcurrencyPermit> p, RequestClock c)
      : state(s), response(std::move(r)), permit(std::move(p)), clock(c) {}

  ServerState& state;
  std::shared_ptr<ResponseStream> response;
  std::shared_ptr<ConcurrencyPermit> permit;
  RequestClock clock;
  bool compat = false;
  bool details = false;
  size_t compute_characters = 0;
  size_t expected = 1;
  std::mutex mutex;
  std::vector<SequenceOutcome> outcomes;

  void add(SequenceOutcome outcome) {
    std::lock_guard<std::mutex> lock(mutex);
    outcomes.push_back(std::move(outcome));
    if (outcomes.size() == expected) answer();
  }

  void answer() {
    for (const auto& o : outcomes) {
      if (o.error) {
        response->respond(
            {o.error->status, {{"Content-Type", "application/json"}}, api_error_json(*o.error)});
        return;
      }
    }
    // TGI returns the candidate with the highest mean token logprob; the others go to
    // best_of_sequences when details were asked for.
    auto best = std::max_element(
        outcomes.begin(), outcomes.end(),
        [](const auto& a, const auto& b) { return a.mean_logprob < b.mean_logprob; });
    GenerateResponseBody body;
    body.result = *best->sequence;
    body.include_details = details;
    if (expected > 1 && details) {
      body.best_of_sequences.emplace();
      for (auto it = outcomes.begin(); it != outcomes.end(); ++it) {
        if (it != best) body.best_of_sequences->push_back(*it->sequence);
      }
    }
    record_success(state.metrics, clock, body.result.generated_tokens);
    GenerateTimings timings;
    const auto now = Clock::now();
    timings.total = now - clock.start;
    timings.validation = clock.enqueued - clock.start;
    timings.queue = std::chrono::nanoseconds(0);
    timings.inference = now - clock.enqueued;
    HttpResponse out;
    out.headers = generate_response_headers(state.compute_type, compute_characters, timings,
                                            best->input_length, body.result.generated_tokens);
    out.body = compat ? compat_generate_response_json(body) : generate_response_json(body);
    response->respond(std::move(out));
  }
};

}  // namespace

void handle_generate(ServerState& state, HttpRequest request,
                     std::shared_ptr<ResponseStream> response, GenerateRoute route) {
  RequestClock clock{Clock::now(), {}, {}};
  auto parsed_or = parse_generate_request(request.body, route == GenerateRoute::kCompat
                                                            ? GenerateBody::kCompat
                                                            : GenerateBody::kGenerate);
  if (auto* rejection = std::get_if<BodyRejection>(&parsed_or)) {
    response->respond(
        {rejection->status, {{"Content-Type", std::string(kTextPlain)}}, rejection->body});
    return;
  }
  ParsedGenerateRequest parsed = std::move(std::get<ParsedGenerateRequest>(parsed_or));
  const bool streaming =
      route == GenerateRoute::kGenerateStream || (route == GenerateRoute::kCompat && parsed.stream);
  state.metrics.increment("tgi_request_count");
  // Streams always answer 200: TGI delivers validation and overload errors as one SSE event.
  const size_t request_characters = count_characters(parsed.inputs);
  auto fail = [&](const ApiError& error, const char* metric_label) {
    if (!streaming) return respond_error(state, *response, error, metric_label);
    state.metrics.increment("tgi_request_failure", metric_label);
    response->start_stream(200, stream_response_headers(state.compute_type, request_characters));
    response->write(stream_error_sse(error));
    response->finish();
  };
  if (auto error = validate_before_permit(parsed, state.limits, streaming)) {
    return fail(*error, "err=\"validation\"");
  }
  const auto num_candidates =
      static_cast<int64_t>(std::max<uint64_t>(parsed.parameters.best_of.value_or(1), 1));
  auto permit_or = ConcurrencyPermit::try_acquire(state, num_candidates);
  if (!permit_or) return fail(overloaded_error(), "err=\"overloaded\"");
  auto permit = std::make_shared<ConcurrencyPermit>(std::move(*permit_or));

  auto valid_or = validate_parameters(std::move(parsed), state.limits, streaming);
  if (auto* error = std::get_if<ApiError>(&valid_or)) {
    return fail(*error, "err=\"validation\"");
  }
  ValidGenerateRequest valid = std::move(std::get<ValidGenerateRequest>(valid_or));
  std::vector<int32_t> ids = state.tokenizer->encode(valid.inputs, /*add_special_tokens=*/true);
  if (auto error = validate_lengths(valid, ids.size(), state.limits)) {
    return fail(*error, "err=\"validation\"");
  }
  if (ids.size() > valid.input_length)
    ids.erase(ids.begin(), ids.end() - valid.input_length);  // truncate
  state.metrics.observe("tgi_request_input_length", static_cast<double>(ids.size()));
  state.metrics.observe("tgi_request_max_new_tokens", valid.max_new_tokens);

  EngineRequest engine_request;
  engine_request.prompt_ids = ids;
  engine_request.sampling = sampling_params_of(valid);
  // TGI bypasses the prefix cache for requests that ask for prompt logprobs.
  engine_request.use_prefix_cache = !valid.decoder_input_details;
  // TGI produces long generations in 1024-token pieces it re-submits silently until the request's
  // max_new_tokens or max_total_tokens is reached; the engine has no piece limit, so the whole
  // request runs as one sequence bounded the same way.
  const auto room = static_cast<uint32_t>(state.limits.max_total_tokens -
                                          std::min(state.limits.max_total_tokens, ids.size()));
  engine_request.max_new_tokens =
      std::min(std::max<uint32_t>(valid.max_total_new_tokens, valid.max_new_tokens),
               std::max<uint32_t>(room, 1));
  const std::optional<uint64_t> reported_seed =
      is_sampled(valid) ? std::optional(valid.seed) : std::nullopt;
  // On POST / (and /invocations) a null return_full_text defaults to true when the model's Hub
  // pipeline tag is text-generation or unknown (always unknown for local models); false elsewhere.
  const bool default_full_text =
      route == GenerateRoute::kCompat && (!state.info.model_pipeline_tag.has_value() ||
                                          *state.info.model_pipeline_tag == "text-generation");
  const SequenceTextOptions text_options{
      valid.inputs, valid.return_full_text.value_or(default_full_text), valid.stop};
  const size_t compute_characters = count_characters(valid.inputs);

  if (streaming) {
    response->start_stream(200, stream_response_headers(state.compute_type, compute_characters));
    clock.enqueued = Clock::now();
    auto sink = std::make_shared<StreamSink>(state, response,
                                             SequenceText(*state.tokenizer, ids, text_options),
                                             clock, valid.details, reported_seed, permit);
    if (Status s = state.engine->submit(std::move(engine_request), sink); !s.ok())
      sink->on_error(s.error().message);
    return;
  }

  clock.enqueued = Clock::now();
  auto collector = std::make_shared<CandidateCollector>(state, response, permit, clock);
  collector->compat = route == GenerateRoute::kCompat;
  collector->details = valid.details || valid.decoder_input_details;
  collector->compute_characters = compute_characters;
  collector->expected = static_cast<size_t>(num_candidates);
  std::mt19937_64 seeds(valid.seed);
  for (int64_t i = 0; i < num_candidates; ++i) {
    EngineRequest candidate = engine_request;
    std::optional<uint64_t> seed = reported_seed;
    if (i > 0) {  // TGI draws an independent seed for every extra candidate
      candidate.sampling.seed = seeds();
      seed = candidate.sampling.seed;
    }
    auto sink = std::make_shared<CollectingSink>(
        state, response, SequenceText(*state.tokenizer, ids, text_options), seed,
        [collector](SequenceOutcome o) { collector->add(std::move(o)); });
    if (Status s = state.engine->submit(std::move(candidate), sink); !s.ok())
      sink->on_error(s.error().message);
  }
}

}  // namespace lm
