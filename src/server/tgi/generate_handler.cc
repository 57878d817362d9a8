// TGI's generate routes (see generate_handler.h): the body parsed, admission, then one StreamSink
// or best_of CollectingSinks whose outcomes a CandidateCollector turns into one JSON answer.
#include "server/tgi/generate_handler.h"

#include <algorithm>
#include <mutex>

#include "server/admission/admission.h"
#include "server/tgi/generate_request.h"
#include "server/tgi/generate_response.h"
#include "server/tgi/generation_sinks.h"
#include "server/tracing/request_trace.h"
#include "server/wire/api_error.h"

namespace lm {
namespace {

void respond_error(ResponseStream& response, const ApiError& error) {
  response.respond({error.status, {{"Content-Type", "application/json"}}, api_error_json(error)});
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
    permit.reset();  // before the answer is sent (see StreamSink::on_token)
    // The queue time ends when the first candidate joined the running batch, the prefill when
    // the first candidate's first token came.
    std::optional<Clock::time_point> first_token;
    for (const auto& o : outcomes) {
      if (o.scheduled && (!clock.scheduled || *o.scheduled < *clock.scheduled))
        clock.scheduled = o.scheduled;
      if (o.first_token && (!first_token || *o.first_token < *first_token))
        first_token = o.first_token;
    }
    if (clock.trace && clock.scheduled) clock.trace->scheduled(*clock.scheduled);
    if (clock.trace && first_token) clock.trace->first_token(*first_token);
    for (const auto& o : outcomes) {
      if (o.error) {
        trace_failure(clock, *o.error);
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
    trace_success(clock, best->input_length, body.result.generated_tokens, body.result.seed);
    HttpResponse out;
    out.headers =
        generate_response_headers(state.compute_type, compute_characters, request_timings(clock),
                                  best->input_length, body.result.generated_tokens);
    out.body = compat ? compat_generate_response_json(body) : generate_response_json(body);
    response->respond(std::move(out));
  }
};

// TGI's handler span names.
const char* span_name(GenerateRoute route) {
  switch (route) {
    case GenerateRoute::kGenerate:
      return "generate";
    case GenerateRoute::kGenerateStream:
      return "generate_stream";
    case GenerateRoute::kCompat:
      break;
  }
  return "compat_generate";
}

}  // namespace

void handle_generate(ServerState& state, HttpRequest request,
                     std::shared_ptr<ResponseStream> response, GenerateRoute route) {
  RequestClock clock = start_request_clock(state, request, span_name(route));
  auto parsed_or = parse_generate_request(request.body, route == GenerateRoute::kCompat
                                                            ? GenerateBody::kCompat
                                                            : GenerateBody::kGenerate);
  if (auto* rejection = std::get_if<BodyRejection>(&parsed_or)) {
    trace_failure(clock, {rejection->status, rejection->body, ""});
    response->respond(
        {rejection->status, {{"Content-Type", std::string(kTextPlain)}}, rejection->body});
    return;
  }
  ParsedGenerateRequest parsed = std::move(std::get<ParsedGenerateRequest>(parsed_or));
  const bool streaming =
      route == GenerateRoute::kGenerateStream || (route == GenerateRoute::kCompat && parsed.stream);
  state.metrics.increment("tgi_request_count");
  const size_t request_characters = count_characters(parsed.inputs);
  AdmissionRequest admission_request = generate_admission_request(std::move(parsed), streaming);
  if (clock.trace) clock.trace->set_parameters(debug_text(admission_request.parameters));
  auto admitted = admit(state, std::move(admission_request));
  if (auto* failure = std::get_if<AdmissionFailure>(&admitted)) {
    state.metrics.increment("tgi_request_failure", failure->metric_label);
    trace_failure(clock, failure->error);
    // Streams always answer 200: TGI delivers validation and overload errors as one SSE event.
    if (!streaming) return respond_error(*response, failure->error);
    response->start_stream(200, stream_response_headers(state.compute_type, request_characters));
    response->write(stream_error_sse(failure->error));
    response->finish();
    return;
  }
  Admission admission = std::move(std::get<Admission>(admitted));
  const AdmittedPrompt& prompt = admission.prompts.front();
  const ValidGenerateRequest& valid = prompt.valid;
  // On POST / (and /invocations) a null return_full_text defaults to true when the model's Hub
  // pipeline tag is text-generation or unknown (always unknown for local models); false elsewhere.
  const bool default_full_text =
      route == GenerateRoute::kCompat && (!state.settings.model_pipeline_tag.has_value() ||
                                          *state.settings.model_pipeline_tag == "text-generation");
  const SequenceTextOptions text_options{
      valid.inputs, valid.return_full_text.value_or(default_full_text), valid.stop};
  const size_t compute_characters = count_characters(valid.inputs);
  auto text = [&] { return SequenceText(*state.tokenizer, prompt.ids, text_options); };

  clock.mark_enqueued();
  release_permit_on_hang_up(admission, *response);
  if (streaming) {
    response->start_stream(200, stream_response_headers(state.compute_type, compute_characters));
    return submit_all(state, admission, [&](const AdmittedGeneration& generation) {
      return std::make_shared<StreamSink>(state, response, text(), clock, valid.details,
                                          generation.reported_seed, admission.permit);
    });
  }
  auto collector = std::make_shared<CandidateCollector>(state, response, admission.permit, clock);
  collector->compat = route == GenerateRoute::kCompat;
  collector->details = valid.details || valid.decoder_input_details;
  collector->compute_characters = compute_characters;
  collector->expected = admission.generations.size();
  submit_all(state, admission, [&](const AdmittedGeneration& generation) {
    return std::make_shared<CollectingSink>(
        state, response, text(), generation.reported_seed,
        [collector](SequenceOutcome o) { collector->add(std::move(o)); });
  });
}

}  // namespace lm
