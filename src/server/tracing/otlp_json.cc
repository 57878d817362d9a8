#include "server/tracing/otlp_json.h"

#include <nlohmann/json.hpp>

namespace lm {
namespace {

using nlohmann::json;

// The instrumentation scope: who made the spans.
constexpr const char* kScopeName = "lm-infer";

json any_value(const SpanAttribute& attribute) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return {{"stringValue", v}};
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return {{"intValue", std::to_string(v)}};  // int64 is a JSON string in OTLP
        } else if constexpr (std::is_same_v<T, double>) {
          return {{"doubleValue", v}};
        } else {
          return {{"boolValue", v}};
        }
      },
      attribute.value);
}

json span_json(const Span& span) {
  json out = {{"traceId", to_hex(span.trace_id)}, {"spanId", to_hex(span.span_id)}};
  if (span.parent_span_id.valid()) out["parentSpanId"] = to_hex(span.parent_span_id);
  out["name"] = span.name;
  out["kind"] = static_cast<int>(span.kind);
  out["startTimeUnixNano"] = std::to_string(span.start_unix_nanos);
  out["endTimeUnixNano"] = std::to_string(span.end_unix_nanos);
  json attributes = json::array();
  for (const SpanAttribute& a : span.attributes)
    attributes.push_back({{"key", a.key}, {"value", any_value(a)}});
  out["attributes"] = std::move(attributes);
  if (span.status != SpanStatusCode::kUnset) {
    json status = {{"code", static_cast<int>(span.status)}};
    if (!span.status_message.empty()) status["message"] = span.status_message;
    out["status"] = std::move(status);
  }
  return out;
}

}  // namespace

std::string otlp_traces_json(const std::vector<Span>& spans, const std::string& service_name) {
  json encoded = json::array();
  for (const Span& span : spans) encoded.push_back(span_json(span));
  json resource = {{"attributes", json::array({{{"key", "service.name"},
                                                {"value", {{"stringValue", service_name}}}}})}};
  json scope_spans = {{"scope", {{"name", kScopeName}}}, {"spans", std::move(encoded)}};
  json request = {{"resourceSpans", json::array({{{"resource", std::move(resource)},
                                                  {"scopeSpans", json::array({scope_spans})}}})}};
  // Invalid UTF-8 (a prompt cut mid-character in an attribute) becomes U+FFFD, not an exception.
  return request.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace lm
