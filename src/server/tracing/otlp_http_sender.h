// OTLP/HTTP with the JSON encoding: POST {endpoint}/v1/traces, Content-Type application/json,
// through libcurl (kept out of this header). TGI exports OTLP/gRPC; a collector takes OTLP/HTTP
// on its port 4318 (gRPC: 4317).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/tracing/span_exporter.h"

namespace lm {

// --otlp-endpoint as the traces URL: `{endpoint}/v1/traces`, or the endpoint as it is when it
// already ends in /v1/traces (a trailing slash is dropped first).
std::string otlp_traces_url(std::string_view endpoint);

// The port an http(s) URL names, if it names one ("http://otel:4317/x" -> 4317).
std::optional<int> url_port(std::string_view url);

class OtlpHttpSender : public SpanSender {
 public:
  explicit OtlpHttpSender(std::string url);
  ~OtlpHttpSender() override;
  OtlpHttpSender(const OtlpHttpSender&) = delete;
  OtlpHttpSender& operator=(const OtlpHttpSender&) = delete;

  // One POST; any status but 2xx is an Error with the start of the receiver's answer.
  Status send(const std::string& body) override;

 private:
  std::string url_;
  void* curl_ = nullptr;     // CURL*, reused so the connection stays open between batches
  void* headers_ = nullptr;  // curl_slist*
};

}  // namespace lm
