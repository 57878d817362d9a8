#include "server/tracing/request_trace.h"

#include <fmt/format.h>

#include <vector>

#include "server/tracing/span_exporter.h"

namespace lm {
namespace {

using std::chrono::nanoseconds;

// Rust's fmt_decimal: the integer part, then the fraction's digits without trailing zeros.
std::string decimal(uint64_t integer, uint64_t fraction, int fraction_digits) {
  std::string text = std::to_string(integer);
  if (fraction == 0) return text;
  std::string digits = fmt::format("{:0{}}", fraction, fraction_digits);
  digits.erase(digits.find_last_not_of('0') + 1);
  return text + "." + digits;
}

// Attribute and status texts are capped: a request's parameters (stop strings, a grammar) could
// otherwise make each queued span as large as the request body.
constexpr size_t kMaxTextBytes = 4096;

std::string capped(std::string_view text) {
  if (text.size() <= kMaxTextBytes) return std::string(text);
  size_t n = kMaxTextBytes;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xc0) == 0x80) --n;  // whole characters
  return std::string(text.substr(0, n)) + "...";
}

std::string debug_seed(const std::optional<uint64_t>& seed) {
  return seed ? fmt::format("Some({})", *seed) : std::string("None");
}

Span child(const Span& root, std::string name, int64_t start, int64_t end) {
  Span span;
  span.trace_id = root.trace_id;
  span.span_id = random_span_id();
  span.parent_span_id = root.span_id;
  span.name = std::move(name);
  span.start_unix_nanos = start;
  span.end_unix_nanos = end;
  return span;
}

void set_error(Span& span, const std::string& message) {
  span.status = SpanStatusCode::kError;
  span.status_message = capped(message);
}

}  // namespace

std::string rust_duration_text(nanoseconds duration) {
  const uint64_t ns = duration.count() > 0 ? static_cast<uint64_t>(duration.count()) : 0;
  if (ns >= 1'000'000'000) return decimal(ns / 1'000'000'000, ns % 1'000'000'000, 9) + "s";
  if (ns >= 1'000'000) return decimal(ns / 1'000'000, ns % 1'000'000, 6) + "ms";
  if (ns >= 1'000) return decimal(ns / 1'000, ns % 1'000, 3) + "\u00b5s";
  return std::to_string(ns) + "ns";
}

std::shared_ptr<RequestTrace> RequestTrace::start(SpanExporter* exporter, std::string name,
                                                  std::string_view traceparent,
                                                  Clock::time_point start) {
  if (exporter == nullptr) return nullptr;
  return std::make_shared<RequestTrace>(*exporter, std::move(name), traceparent, start);
}

RequestTrace::RequestTrace(SpanExporter& exporter, std::string name, std::string_view traceparent,
                           Clock::time_point start)
    : exporter_(exporter),
      name_(std::move(name)),
      root_span_id_(random_span_id()),
      start_(start),
      steady_anchor_(Clock::now()),
      unix_anchor_nanos_(std::chrono::duration_cast<nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count()) {
  if (auto parent = parse_traceparent(traceparent)) {
    trace_id_ = parent->trace_id;
    parent_span_id_ = parent->parent_span_id;
  } else {
    trace_id_ = random_trace_id();
  }
}

RequestTrace::~RequestTrace() {
  if (!ended_) {
    Outcome dropped;
    dropped.error_type = "dropped";
    dropped.message = "the request ended before its response (the client went away)";
    finish(dropped);
  }
}

int64_t RequestTrace::unix_nanos(Clock::time_point t) const {
  return unix_anchor_nanos_ + std::chrono::duration_cast<nanoseconds>(t - steady_anchor_).count();
}

void RequestTrace::set_parameters(std::string text) {
  std::lock_guard<std::mutex> lock(mutex_);
  parameters_ = capped(text);
}

void RequestTrace::enqueued(Clock::time_point t) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enqueued_) enqueued_ = t;
}

void RequestTrace::scheduled(Clock::time_point t) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!scheduled_) scheduled_ = t;
}

void RequestTrace::first_token(Clock::time_point t) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!first_token_) first_token_ = t;
}

void RequestTrace::succeed(const Success& success) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return;
  Outcome outcome;
  outcome.success = success;
  finish(outcome);
}

void RequestTrace::fail(int status, std::string_view error_type, std::string_view message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return;
  finish({std::nullopt, status, std::string(error_type), std::string(message)});
}

void RequestTrace::finish(const Outcome& outcome) {
  ended_ = true;
  const Clock::time_point end = Clock::now();
  const bool ok = outcome.success.has_value();
  std::vector<Span> spans;
  spans.reserve(6);

  Span root;
  root.trace_id = trace_id_;
  root.span_id = root_span_id_;
  root.parent_span_id = parent_span_id_;
  root.name = name_;
  root.kind = SpanKind::kServer;
  root.start_unix_nanos = unix_nanos(start_);
  root.end_unix_nanos = unix_nanos(end);
  if (!parameters_.empty()) root.add_string("parameters", parameters_);
  if (ok) {
    // TGI's fields, as its generate handler records them on success.
    const Success& s = *outcome.success;
    const Clock::time_point enqueued = enqueued_.value_or(end);
    const Clock::time_point scheduled = scheduled_.value_or(end);
    const auto inference = end - scheduled;
    root.add_string("total_time", rust_duration_text(end - start_));
    root.add_string("validation_time", rust_duration_text(enqueued - start_));
    root.add_string("queue_time", rust_duration_text(scheduled - enqueued));
    root.add_string("inference_time", rust_duration_text(inference));
    if (s.generated_tokens > 0)
      root.add_string("time_per_token", rust_duration_text(inference / s.generated_tokens));
    root.add_string("seed", debug_seed(s.seed));
    root.add_int("gen_ai.usage.input_tokens", s.input_tokens);
    root.add_int("gen_ai.usage.output_tokens", s.generated_tokens);
  } else {
    if (outcome.status != 0) root.add_int("http.response.status_code", outcome.status);
    if (!outcome.error_type.empty()) root.add_string("error.type", outcome.error_type);
    set_error(root, outcome.message);
  }
  spans.push_back(root);

  // The phases; a failure marks the one it ended.
  Span validate =
      child(root, "validate", root.start_unix_nanos, unix_nanos(enqueued_.value_or(end)));
  if (!ok && !enqueued_) set_error(validate, outcome.message);
  spans.push_back(std::move(validate));
  if (enqueued_) {
    Span queued =
        child(root, "queued", unix_nanos(*enqueued_), unix_nanos(scheduled_.value_or(end)));
    if (!ok && !scheduled_) set_error(queued, outcome.message);
    spans.push_back(std::move(queued));
  }
  if (enqueued_ && scheduled_) {
    Span infer = child(root, "infer", unix_nanos(*scheduled_), root.end_unix_nanos);
    Span prefill =
        child(infer, "prefill", infer.start_unix_nanos, unix_nanos(first_token_.value_or(end)));
    if (!ok) set_error(infer, outcome.message);
    if (!ok && !first_token_) set_error(prefill, outcome.message);
    const bool decoded = first_token_ && (ok ? outcome.success->generated_tokens > 1 : true);
    std::optional<Span> decode;
    if (decoded) {
      decode = child(infer, "decode", unix_nanos(*first_token_), root.end_unix_nanos);
      if (!ok) set_error(*decode, outcome.message);
    }
    spans.push_back(std::move(infer));
    spans.push_back(std::move(prefill));
    if (decode) spans.push_back(std::move(*decode));
  }
  exporter_.export_spans(std::move(spans));
}

}  // namespace lm
