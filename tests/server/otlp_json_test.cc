#include "server/tracing/otlp_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace lm {
namespace {

using nlohmann::json;

Span make_root() {
  Span root;
  root.trace_id =
      parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")->trace_id;
  root.span_id.bytes = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
  root.parent_span_id.bytes = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
  root.name = "generate";
  root.kind = SpanKind::kServer;
  root.start_unix_nanos = 1'700'000'000'123'456'789;
  root.end_unix_nanos = 1'700'000'001'000'000'000;
  root.add_string("parameters", "GenerateParameters { best_of: None }");
  root.add_int("gen_ai.usage.output_tokens", 5);
  root.add_int("big", int64_t{1} << 60);
  root.add_double("ratio", 0.25);
  root.add_bool("streamed", false);
  return root;
}

TEST(OtlpJson, EncodesSpansAsOtlpHttpJson) {
  Span root = make_root();
  Span child;
  child.trace_id = root.trace_id;
  child.span_id.bytes = {0xff, 0, 0, 0, 0, 0, 0, 0x10};
  child.parent_span_id = root.span_id;
  child.name = "validate";
  child.start_unix_nanos = 5;
  child.end_unix_nanos = 6;
  child.status = SpanStatusCode::kError;
  child.status_message = "Input validation error: `inputs` cannot be empty";

  const json body = json::parse(otlp_traces_json({root, child}, "my-service"));
  ASSERT_EQ(body["resourceSpans"].size(), 1u);
  const json& resource_spans = body["resourceSpans"][0];
  EXPECT_EQ(resource_spans["resource"]["attributes"],
            json::parse(R"([{"key":"service.name","value":{"stringValue":"my-service"}}])"));
  ASSERT_EQ(resource_spans["scopeSpans"].size(), 1u);
  EXPECT_EQ(resource_spans["scopeSpans"][0]["scope"]["name"], "lm-infer");
  const json& spans = resource_spans["scopeSpans"][0]["spans"];
  ASSERT_EQ(spans.size(), 2u);

  const json& r = spans[0];
  EXPECT_EQ(r["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(r["spanId"], "0102030405060708");
  EXPECT_EQ(r["parentSpanId"], "00f067aa0ba902b7");
  EXPECT_EQ(r["name"], "generate");
  EXPECT_EQ(r["kind"], 2);  // SPAN_KIND_SERVER
  // Unix nanoseconds and int64 values are JSON strings (they do not fit a double).
  EXPECT_EQ(r["startTimeUnixNano"], "1700000000123456789");
  EXPECT_EQ(r["endTimeUnixNano"], "1700000001000000000");
  EXPECT_EQ(r["attributes"], json::parse(R"([
      {"key":"parameters","value":{"stringValue":"GenerateParameters { best_of: None }"}},
      {"key":"gen_ai.usage.output_tokens","value":{"intValue":"5"}},
      {"key":"big","value":{"intValue":"1152921504606846976"}},
      {"key":"ratio","value":{"doubleValue":0.25}},
      {"key":"streamed","value":{"boolValue":false}}])"));
  EXPECT_FALSE(r.contains("status"));  // unset

  const json& c = spans[1];
  EXPECT_EQ(c["spanId"], "ff00000000000010");
  EXPECT_EQ(c["parentSpanId"], "0102030405060708");
  EXPECT_EQ(c["kind"], 1);  // SPAN_KIND_INTERNAL
  EXPECT_EQ(c["attributes"], json::array());
  EXPECT_EQ(c["status"], json::parse(R"({"code":2,
      "message":"Input validation error: `inputs` cannot be empty"})"));
}

TEST(OtlpJson, RootWithoutParentHasNoParentSpanId) {
  Span root = make_root();
  root.parent_span_id = SpanId{};
  const json body = json::parse(otlp_traces_json({root}, "s"));
  EXPECT_FALSE(body["resourceSpans"][0]["scopeSpans"][0]["spans"][0].contains("parentSpanId"));
}

TEST(OtlpJson, InvalidUtf8IsReplacedNotThrown) {
  Span root = make_root();
  root.add_string("parameters", std::string("cut \xe2\x82", 6));
  const json body = json::parse(otlp_traces_json({root}, "s"));
  const json& attributes = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"];
  EXPECT_EQ(attributes.back()["value"]["stringValue"], "cut \xef\xbf\xbd");
}

}  // namespace
}  // namespace lm
