// The TokenSinks of the generate routes. StreamSink writes one SSE event per token;
// CollectingSink gathers a whole sequence and hands it to a callback (the JSON response, or the
// best_of chooser). Both run on the engine thread and only post bytes to the ResponseStream.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "engine/token_sink.h"
#include "server/state/server_state.h"
#include "server/state/tgi_metrics.h"
#include "server/text/sequence_text.h"
#include "server/tgi/generate_response.h"
#include "server/tracing/request_trace.h"
#include "server/transport/http_types.h"
#include "server/wire/api_error.h"

namespace lm {

using Clock = std::chrono::steady_clock;

// Timestamps of one request, for the x-*-time headers and the duration metrics, and its trace.
struct RequestClock {
  Clock::time_point start;     // request received
  Clock::time_point enqueued;  // submitted to the engine
  // Joined the running batch (TokenSink::on_scheduled): the queue time ends, inference starts.
  std::optional<Clock::time_point> scheduled;
  // The request's spans; null unless --otlp-endpoint is set (each use is one null check).
  std::shared_ptr<RequestTrace> trace;

  void mark_enqueued() {
    enqueued = Clock::now();
    if (trace) trace->enqueued(enqueued);
  }
  void mark_scheduled() {  // the first time only, not a re-admission after preemption
    if (scheduled) return;
    scheduled = Clock::now();
    if (trace) trace->scheduled(*scheduled);
  }
  void mark_first_token() const {
    if (trace) trace->first_token(Clock::now());
  }
};

// Starts a request's clock now, with a trace named after TGI's handler span when tracing is on
// (a child of the request's traceparent when it is valid).
RequestClock start_request_clock(const ServerState& state, const HttpRequest& request,
                                 const char* span_name);

// Records TGI's per-request success metrics.
void record_success(Metrics& metrics, const RequestClock& clock, uint32_t generated_tokens);
// Ends the request's trace, when it has one, as a success or with the error it answered.
void trace_success(const RequestClock& clock, uint32_t input_tokens, uint32_t generated_tokens,
                   std::optional<uint64_t> seed);
void trace_failure(const RequestClock& clock, const ApiError& error);
// The x-*-time headers' split of a request answered now: validation until enqueued, queue until
// it joined the running batch, inference since.
GenerateTimings request_timings(const RequestClock& clock);

class StreamSink : public TokenSink {
 public:
  StreamSink(ServerState& state, std::shared_ptr<ResponseStream> response, SequenceText text,
             RequestClock clock, bool details, std::optional<uint64_t> seed,
             std::shared_ptr<ConcurrencyPermit> permit);
  ~StreamSink() override;
  bool on_token(const TokenEvent& event) override;
  void on_error(const std::string& message) override;
  bool cancelled() const override { return response_->closed(); }
  void on_scheduled() override;

 private:
  ServerState& state_;
  std::shared_ptr<ResponseStream> response_;
  SequenceText text_;
  RequestClock clock_;
  bool details_;
  std::optional<uint64_t> seed_;
  std::shared_ptr<ConcurrencyPermit> permit_;
  InterTokenTimer inter_token_;
  bool done_ = false;
};

struct SequenceOutcome {
  std::optional<GeneratedSequence> sequence;  // null on error
  std::optional<ApiError> error;
  double mean_logprob = 0;
  uint32_t input_length = 0;
  std::optional<Clock::time_point> scheduled;    // when it joined the running batch
  std::optional<Clock::time_point> first_token;  // when its first token came
};

class CollectingSink : public TokenSink {
 public:
  using Callback = std::function<void(SequenceOutcome)>;
  CollectingSink(ServerState& state, std::shared_ptr<ResponseStream> response, SequenceText text,
                 std::optional<uint64_t> seed, Callback on_done);
  ~CollectingSink() override;
  bool on_token(const TokenEvent& event) override;
  void on_error(const std::string& message) override;
  bool cancelled() const override { return response_->closed(); }
  void on_scheduled() override;

 private:
  ServerState& state_;
  std::shared_ptr<ResponseStream> response_;
  SequenceText text_;
  std::optional<uint64_t> seed_;
  Callback on_done_;
  std::optional<Clock::time_point> scheduled_;
  std::optional<Clock::time_point> first_token_;
  InterTokenTimer inter_token_;
  bool done_ = false;
};

}  // namespace lm
