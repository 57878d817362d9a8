// Trace and span ids (W3C Trace Context, OTLP): random 16- and 8-byte ids, their lowercase hex,
// and the `traceparent` header through which a caller makes our request span a child of its own.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lm {

struct TraceId {
  std::array<uint8_t, 16> bytes{};
  bool valid() const;  // not all zero (W3C: an all-zero id is invalid)
  bool operator==(const TraceId&) const = default;
};

struct SpanId {
  std::array<uint8_t, 8> bytes{};
  bool valid() const;
  bool operator==(const SpanId&) const = default;
};

std::string to_hex(const TraceId& id);  // 32 lowercase hex digits
std::string to_hex(const SpanId& id);   // 16 lowercase hex digits

// Fresh random ids (never all zero), from a per-thread generator seeded by std::random_device.
TraceId random_trace_id();
SpanId random_span_id();

// `traceparent: {version}-{trace id}-{parent span id}-{flags}`.
struct TraceParent {
  TraceId trace_id;
  SpanId parent_span_id;
  uint8_t flags = 0;  // bit 0: the caller sampled it (we record every request: TGI's AlwaysOn)
};

// Parses a traceparent header value by W3C Trace Context's rules: lowercase hex fields of fixed
// width, version `ff` forbidden, all-zero trace or span ids invalid; version 00 is exactly 55
// characters, a later version may append `-`-prefixed fields. nullopt for anything else: the
// request then starts a trace of its own.
std::optional<TraceParent> parse_traceparent(std::string_view header);

}  // namespace lm
