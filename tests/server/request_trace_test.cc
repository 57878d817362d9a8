#include "server/tracing/request_trace.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "server/tracing/span_exporter.h"

namespace lm {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = RequestTrace::Clock;

constexpr const char* kTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

class RecordingSender : public SpanSender {
 public:
  explicit RecordingSender(std::vector<std::string>* bodies) : bodies_(bodies) {}
  Status send(const std::string& body) override {
    bodies_->push_back(body);
    return {};
  }

 private:
  std::vector<std::string>* bodies_;
};

// The spans one traced request exported, by name.
struct Exported {
  std::vector<std::string> bodies;
  SpanExporter exporter{"svc", std::make_unique<RecordingSender>(&bodies),
                        SpanExporter::Options{.interval = std::chrono::hours(1)}};
  std::map<std::string, json> spans() {
    exporter.shutdown();  // the flush sends them
    std::map<std::string, json> by_name;
    for (const std::string& body : bodies) {
      const json request = json::parse(body);
      for (const json& span : request["resourceSpans"][0]["scopeSpans"][0]["spans"]) {
        EXPECT_FALSE(by_name.contains(span["name"])) << span["name"];
        by_name[span["name"]] = span;
      }
    }
    return by_name;
  }
};

std::map<std::string, json> attributes(const json& span) {
  std::map<std::string, json> out;
  for (const json& a : span["attributes"]) out[a["key"]] = a["value"];
  return out;
}

int64_t nanos(const json& span, const char* field) {
  return std::stoll(span[field].get<std::string>());
}

TEST(RequestTrace, NoExporterNoTrace) {
  EXPECT_EQ(RequestTrace::start(nullptr, "generate", kTraceparent, Clock::now()), nullptr);
}

TEST(RequestTrace, ASucceededRequestIsTgisSpanTreeUnderTheCallersSpan) {
  Exported out;
  const auto start = Clock::now() - 10ms;  // the marks below lie before the end (now)
  auto trace = RequestTrace::start(&out.exporter, "generate", kTraceparent, start);
  ASSERT_NE(trace, nullptr);
  trace->set_parameters("GenerateParameters { best_of: None }");
  trace->enqueued(start + 1ms);
  trace->scheduled(start + 3ms);
  trace->scheduled(start + 4ms);  // a re-admission after preemption: the first one counts
  trace->first_token(start + 5ms);
  trace->succeed({7, 4, 42});
  trace->fail(500, "late", "ignored: the request already ended");
  trace.reset();

  auto spans = out.spans();
  ASSERT_EQ(spans.size(), 6u);
  const json& root = spans.at("generate");
  EXPECT_EQ(root["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(root["parentSpanId"], "00f067aa0ba902b7");
  EXPECT_EQ(root["kind"], 2);
  EXPECT_FALSE(root.contains("status"));
  for (const char* name : {"validate", "queued", "infer", "prefill", "decode"}) {
    const json& span = spans.at(name);
    EXPECT_EQ(span["traceId"], root["traceId"]) << name;
    EXPECT_EQ(span["kind"], 1) << name;
    EXPECT_FALSE(span.contains("status")) << name;
    EXPECT_GE(nanos(span, "startTimeUnixNano"), nanos(root, "startTimeUnixNano")) << name;
    EXPECT_LE(nanos(span, "endTimeUnixNano"), nanos(root, "endTimeUnixNano")) << name;
  }
  for (const char* name : {"validate", "queued", "infer"})
    EXPECT_EQ(spans.at(name)["parentSpanId"], root["spanId"]) << name;
  for (const char* name : {"prefill", "decode"})
    EXPECT_EQ(spans.at(name)["parentSpanId"], spans.at("infer")["spanId"]) << name;

  // The phases follow the marks: validate 1 ms, queued 2 ms, prefill 2 ms.
  const int64_t t0 = nanos(root, "startTimeUnixNano");
  auto at = [&](const char* name, const char* field) { return nanos(spans.at(name), field) - t0; };
  EXPECT_EQ(at("validate", "startTimeUnixNano"), 0);
  EXPECT_EQ(at("validate", "endTimeUnixNano"), 1'000'000);
  EXPECT_EQ(at("queued", "startTimeUnixNano"), 1'000'000);
  EXPECT_EQ(at("queued", "endTimeUnixNano"), 3'000'000);
  EXPECT_EQ(at("infer", "startTimeUnixNano"), 3'000'000);
  EXPECT_EQ(at("prefill", "endTimeUnixNano"), 5'000'000);
  EXPECT_EQ(at("decode", "startTimeUnixNano"), 5'000'000);
  EXPECT_EQ(spans.at("decode")["endTimeUnixNano"], root["endTimeUnixNano"]);
  EXPECT_EQ(spans.at("infer")["endTimeUnixNano"], root["endTimeUnixNano"]);
  // Unix time, not the steady clock's epoch.
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  EXPECT_LT(std::abs(now - t0), int64_t{60'000'000'000});

  auto a = attributes(root);
  EXPECT_EQ(a.at("parameters")["stringValue"], "GenerateParameters { best_of: None }");
  EXPECT_EQ(a.at("validation_time")["stringValue"], "1ms");
  EXPECT_EQ(a.at("queue_time")["stringValue"], "2ms");
  for (const char* key : {"total_time", "inference_time", "time_per_token"})
    EXPECT_TRUE(a.contains(key)) << key;
  EXPECT_EQ(a.at("seed")["stringValue"], "Some(42)");
  EXPECT_EQ(a.at("gen_ai.usage.input_tokens")["intValue"], "7");
  EXPECT_EQ(a.at("gen_ai.usage.output_tokens")["intValue"], "4");
}

TEST(RequestTrace, AValidationFailureEndsInTheValidateSpan) {
  Exported out;
  auto trace =
      RequestTrace::start(&out.exporter, "chat_completions", "not a traceparent", Clock::now());
  trace->fail(422, "validation", "Input validation error: `temperature` must be strictly positive");
  trace.reset();
  auto spans = out.spans();
  ASSERT_EQ(spans.size(), 2u);  // no queue, no inference
  const json& root = spans.at("chat_completions");
  EXPECT_FALSE(root.contains("parentSpanId"));  // a malformed traceparent starts a new trace
  EXPECT_NE(root["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(root["status"]["code"], 2);
  EXPECT_EQ(root["status"]["message"],
            "Input validation error: `temperature` must be strictly positive");
  auto a = attributes(root);
  EXPECT_EQ(a.at("http.response.status_code")["intValue"], "422");
  EXPECT_EQ(a.at("error.type")["stringValue"], "validation");
  EXPECT_FALSE(a.contains("total_time"));  // TGI records its timings on success only
  EXPECT_EQ(spans.at("validate")["status"]["code"], 2);
  EXPECT_EQ(spans.at("validate")["traceId"], root["traceId"]);
}

TEST(RequestTrace, AnUnfinishedRequestIsExportedAsDropped) {
  Exported out;
  const auto start = Clock::now() - 10ms;
  auto trace = RequestTrace::start(&out.exporter, "generate_stream", "", start);
  trace->enqueued(start + 1ms);
  trace->scheduled(start + 2ms);
  trace.reset();  // the last sink went away without an answer
  auto spans = out.spans();
  ASSERT_EQ(spans.size(), 5u);  // generate_stream, validate, queued, infer, prefill (no token)
  EXPECT_EQ(spans.at("generate_stream")["status"]["code"], 2);
  EXPECT_EQ(attributes(spans.at("generate_stream")).at("error.type")["stringValue"], "dropped");
  EXPECT_EQ(spans.at("prefill")["status"]["code"], 2);  // where it ended
  EXPECT_EQ(spans.at("infer")["status"]["code"], 2);
  EXPECT_FALSE(spans.at("queued").contains("status"));
  EXPECT_FALSE(spans.at("validate").contains("status"));
}

TEST(RequestTrace, OneTokenHasNoDecode) {
  Exported out;
  const auto start = Clock::now() - 10ms;
  auto trace = RequestTrace::start(&out.exporter, "completions", "", start);
  trace->enqueued(start);
  trace->scheduled(start);
  trace->first_token(start + 1ms);
  trace->succeed({3, 1, std::nullopt});
  trace.reset();
  auto spans = out.spans();
  EXPECT_FALSE(spans.contains("decode"));
  EXPECT_TRUE(spans.contains("prefill"));
  EXPECT_EQ(attributes(spans.at("completions")).at("seed")["stringValue"], "None");
}

TEST(RequestTrace, LongTextsAreCappedAtWholeCharacters) {
  Exported out;
  auto trace = RequestTrace::start(&out.exporter, "generate", "", Clock::now());
  trace->set_parameters(std::string(4095, 'p') + "\u00e9" + std::string(100000, 'p'));
  trace->fail(422, "validation", std::string(1 << 20, 'm'));
  trace.reset();
  auto spans = out.spans();
  const json& root = spans.at("generate");
  EXPECT_EQ(attributes(root).at("parameters")["stringValue"], std::string(4095, 'p') + "...");
  EXPECT_EQ(root["status"]["message"], std::string(4096, 'm') + "...");
}

TEST(RustDurationText, MatchesRustsDebugFormat) {
  using std::chrono::nanoseconds;
  EXPECT_EQ(rust_duration_text(nanoseconds(0)), "0ns");
  EXPECT_EQ(rust_duration_text(nanoseconds(999)), "999ns");
  EXPECT_EQ(rust_duration_text(nanoseconds(1'500)), "1.5\u00b5s");
  EXPECT_EQ(rust_duration_text(nanoseconds(12'250'000)), "12.25ms");
  EXPECT_EQ(rust_duration_text(nanoseconds(12'000'001)), "12.000001ms");
  EXPECT_EQ(rust_duration_text(nanoseconds(1'500'000'000)), "1.5s");
  EXPECT_EQ(rust_duration_text(nanoseconds(2'000'000'000)), "2s");
  EXPECT_EQ(rust_duration_text(nanoseconds(-5)), "0ns");
}

}  // namespace
}  // namespace lm
