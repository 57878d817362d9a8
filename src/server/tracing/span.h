// One finished span as OTLP carries it: ids, name, kind, start and end in Unix nanoseconds,
// attributes and status. Plain data; request_trace builds them, otlp_json encodes them.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "server/tracing/trace_ids.h"

namespace lm {

// OTLP's SpanKind and Status.code numbers.
enum class SpanKind { kInternal = 1, kServer = 2 };
enum class SpanStatusCode { kUnset = 0, kOk = 1, kError = 2 };

struct SpanAttribute {
  std::string key;
  std::variant<std::string, int64_t, double, bool> value;
};

struct Span {
  TraceId trace_id;
  SpanId span_id;
  SpanId parent_span_id;  // all zero: a root span with no parent
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  int64_t start_unix_nanos = 0;
  int64_t end_unix_nanos = 0;
  std::vector<SpanAttribute> attributes;
  SpanStatusCode status = SpanStatusCode::kUnset;
  std::string status_message;  // with kError

  // Named per type: a string literal would otherwise pick the variant's bool.
  void add_string(std::string key, std::string value) {
    attributes.push_back({std::move(key), std::move(value)});
  }
  void add_int(std::string key, int64_t value) { attributes.push_back({std::move(key), value}); }
  void add_double(std::string key, double value) { attributes.push_back({std::move(key), value}); }
  void add_bool(std::string key, bool value) { attributes.push_back({std::move(key), value}); }
};

}  // namespace lm
