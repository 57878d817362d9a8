// One request's spans in TGI's shape. The root is the route handler's span (`generate`,
// `generate_stream`, `compat_generate`, `chat_completions`, `completions`; kind server), a child
// of the caller's span when the request carried a valid traceparent. Under it: `validate`
// (received -> submitted to the engine), `queued` (-> first joined the running batch) and `infer`
// (-> the last token), which splits into `prefill` (-> the first token) and `decode` (-> the last
// token). The root carries TGI's span fields (parameters, total_time, validation_time,
// queue_time, inference_time, time_per_token, seed) and the token counts; a failure sets the
// error status on the root and on the phase it ended.
//
// The HTTP thread starts it and the sinks on the engine thread mark its phases (a lock inside);
// all spans go to the exporter together when the request ends: succeed(), fail(), or the last
// owner releasing it unfinished (the client went away).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "server/tracing/span.h"

namespace lm {

class SpanExporter;

// A duration as Rust's Debug prints it, which is how TGI records its span fields ("1.5s",
// "12.25ms", "830µs", "0ns").
std::string rust_duration_text(std::chrono::nanoseconds duration);

class RequestTrace {
 public:
  using Clock = std::chrono::steady_clock;
  struct Success {
    uint32_t input_tokens = 0;
    uint32_t generated_tokens = 0;
    std::optional<uint64_t> seed;
  };

  // A trace for a request received at `start`, or null when tracing is off (no exporter).
  static std::shared_ptr<RequestTrace> start(SpanExporter* exporter, std::string name,
                                             std::string_view traceparent, Clock::time_point start);
  RequestTrace(SpanExporter& exporter, std::string name, std::string_view traceparent,
               Clock::time_point start);
  ~RequestTrace();  // unfinished: exported as failed ("dropped")
  RequestTrace(const RequestTrace&) = delete;
  RequestTrace& operator=(const RequestTrace&) = delete;

  // TGI's `parameters` field: the request's GenerateParameters as Rust's Debug shows them
  // (kept to its first 4 KiB, as are error messages).
  void set_parameters(std::string text);
  void enqueued(Clock::time_point t);     // validation ends, the queue starts
  void scheduled(Clock::time_point t);    // the first call counts (not a re-admission)
  void first_token(Clock::time_point t);  // the first call counts
  void succeed(const Success& success);   // ends the request now
  void fail(int status, std::string_view error_type, std::string_view message);  // ends it now

  const TraceId& trace_id() const { return trace_id_; }
  const SpanId& span_id() const { return root_span_id_; }

 private:
  struct Outcome {
    std::optional<Success> success;
    int status = 0;
    std::string error_type;
    std::string message;
  };
  void finish(const Outcome& outcome);  // mutex held
  int64_t unix_nanos(Clock::time_point t) const;

  SpanExporter& exporter_;
  const std::string name_;
  TraceId trace_id_;
  SpanId parent_span_id_;  // the caller's; zero when it sent none
  const SpanId root_span_id_;
  const Clock::time_point start_;
  // steady -> Unix time: both clocks read once, together.
  const Clock::time_point steady_anchor_;
  const int64_t unix_anchor_nanos_;
  std::mutex mutex_;
  std::string parameters_;
  std::optional<Clock::time_point> enqueued_;
  std::optional<Clock::time_point> scheduled_;
  std::optional<Clock::time_point> first_token_;
  bool ended_ = false;
};

}  // namespace lm
