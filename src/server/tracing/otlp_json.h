// OTLP/HTTP's JSON encoding of an ExportTraceServiceRequest (opentelemetry-proto's JSON mapping):
// ids as lowercase hex, times and 64-bit integers as decimal strings, enums as numbers.
#pragma once

#include <string>
#include <vector>

#include "server/tracing/span.h"

namespace lm {

// One resourceSpans entry whose resource carries `service.name`, one scope, the spans in order.
std::string otlp_traces_json(const std::vector<Span>& spans, const std::string& service_name);

}  // namespace lm
