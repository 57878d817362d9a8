#include "server/tgi/generation_sinks.h"

#include "server/tgi/generate_response.h"

namespace lm {
namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

RequestClock start_request_clock(const ServerState& state, const HttpRequest& request,
                                 const char* span_name) {
  RequestClock clock;
  clock.start = request.received != Clock::time_point{} ? request.received : Clock::now();
  if (state.span_exporter != nullptr) {
    clock.trace = RequestTrace::start(state.span_exporter, span_name, request.header("traceparent"),
                                      clock.start);
  }
  return clock;
}

void trace_success(const RequestClock& clock, uint32_t input_tokens, uint32_t generated_tokens,
                   std::optional<uint64_t> seed) {
  if (clock.trace) clock.trace->succeed({input_tokens, generated_tokens, seed});
}

void trace_failure(const RequestClock& clock, const ApiError& error) {
  if (clock.trace) clock.trace->fail(error.status, error.error_type, error.error);
}

void record_success(Metrics& metrics, const RequestClock& clock, uint32_t generated_tokens) {
  const auto now = Clock::now();
  const auto scheduled = clock.scheduled.value_or(now);
  metrics.increment("tgi_request_success");
  metrics.observe("tgi_request_duration", seconds(now - clock.start));
  metrics.observe("tgi_request_validation_duration", seconds(clock.enqueued - clock.start));
  metrics.observe("tgi_request_queue_duration", seconds(scheduled - clock.enqueued));
  metrics.observe("tgi_request_inference_duration", seconds(now - scheduled));
  if (generated_tokens > 0) {
    metrics.observe("tgi_request_mean_time_per_token_duration",
                    seconds(now - scheduled) / generated_tokens);
  }
  metrics.observe("tgi_request_generated_tokens", generated_tokens);
}

GenerateTimings request_timings(const RequestClock& clock) {
  const auto now = Clock::now();
  const auto scheduled = clock.scheduled.value_or(now);
  GenerateTimings timings;
  timings.total = now - clock.start;
  timings.validation = clock.enqueued - clock.start;
  timings.queue = scheduled - clock.enqueued;
  timings.inference = now - scheduled;
  return timings;
}

StreamSink::StreamSink(ServerState& state, std::shared_ptr<ResponseStream> response,
                       SequenceText text, RequestClock clock, bool details,
                       std::optional<uint64_t> seed, std::shared_ptr<ConcurrencyPermit> permit)
    : state_(state),
      response_(std::move(response)),
      text_(std::move(text)),
      clock_(clock),
      details_(details),
      seed_(seed),
      permit_(std::move(permit)) {}

StreamSink::~StreamSink() {
  if (!done_) {
    state_.metrics.increment("tgi_request_failure", "err=\"dropped\"");
    response_->finish();
  }
}

void StreamSink::on_scheduled() { clock_.mark_scheduled(); }

bool StreamSink::on_token(const TokenEvent& event) {
  SequenceText::Step step = text_.add(event);
  inter_token_.on_token(state_.metrics);
  if (text_.num_generated() == 1) clock_.mark_first_token();
  StreamTokenEvent sse;
  sse.index = text_.num_generated();
  sse.token = std::move(step.token);
  sse.top_tokens = std::move(step.top_tokens);
  if (step.finish_reason) {
    GeneratedSequence result = text_.result(*step.finish_reason, seed_);
    sse.generated_text = result.generated_text;
    if (details_) {
      sse.details = StreamDetailsBody{result.finish_reason, result.generated_tokens, seed_,
                                      text_.input_length()};
    }
  }
  // NOTE: the permit goes before the last event does, as TGI's goes when its handler returns: a
  // client that sends its next request as soon as it reads this one's end must find it free.
  if (step.finish_reason) permit_.reset();
  response_->write(stream_event_sse(sse));
  if (!step.finish_reason) return true;
  done_ = true;
  record_success(state_.metrics, clock_, text_.num_generated());
  // Before the response ends: a drained server then finds the spans queued for its flush.
  trace_success(clock_, text_.input_length(), text_.num_generated(), seed_);
  response_->finish();
  return false;
}

void StreamSink::on_error(const std::string& message) {
  done_ = true;
  state_.healthy = false;  // TGI: a generation error marks the backend unhealthy
  state_.metrics.increment("tgi_request_failure", "err=\"generation\"");
  const ApiError error = generation_error(message);
  trace_failure(clock_, error);
  permit_.reset();
  response_->write(stream_error_sse(error));
  response_->finish();
}

CollectingSink::CollectingSink(ServerState& state, std::shared_ptr<ResponseStream> response,
                               SequenceText text, std::optional<uint64_t> seed, Callback on_done)
    : state_(state),
      response_(std::move(response)),
      text_(std::move(text)),
      seed_(seed),
      on_done_(std::move(on_done)) {}

CollectingSink::~CollectingSink() {
  if (!done_) state_.metrics.increment("tgi_request_failure", "err=\"dropped\"");
}

void CollectingSink::on_scheduled() {
  if (!scheduled_) scheduled_ = Clock::now();
}

bool CollectingSink::on_token(const TokenEvent& event) {
  SequenceText::Step step = text_.add(event);
  inter_token_.on_token(state_.metrics);
  if (!first_token_) first_token_ = Clock::now();
  if (!step.finish_reason) return true;
  done_ = true;
  SequenceOutcome outcome;
  outcome.scheduled = scheduled_;
  outcome.first_token = first_token_;
  outcome.sequence = text_.result(*step.finish_reason, seed_);
  outcome.mean_logprob = text_.mean_logprob();
  outcome.input_length = text_.input_length();
  on_done_(std::move(outcome));
  return false;
}

void CollectingSink::on_error(const std::string& message) {
  done_ = true;
  state_.healthy = false;  // TGI: a generation error marks the backend unhealthy
  state_.metrics.increment("tgi_request_failure", "err=\"generation\"");
  SequenceOutcome outcome;
  outcome.error = generation_error(message);
  on_done_(std::move(outcome));
}

}  // namespace lm
