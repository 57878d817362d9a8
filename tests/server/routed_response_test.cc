// RoutedResponse: CORS headers on every answer; fail() answers 500 in TGI's error shape when
// nothing was sent, ends a started stream, does nothing after a finished answer, and silences
// every later call.
#include "server/routed_response.h"

#include <gtest/gtest.h>

#include <vector>

namespace lm {
namespace {

// Records the calls it gets, in order.
class CallLog : public ResponseStream {
 public:
  void respond(HttpResponse response) override {
    calls.push_back("respond " + std::to_string(response.status) + " " + response.body);
    headers = response.headers;
  }
  void start_stream(int status, Headers h) override {
    calls.push_back("start " + std::to_string(status));
    headers = h;
  }
  void write(std::string chunk) override { calls.push_back("write " + chunk); }
  void finish() override { calls.push_back("finish"); }
  bool closed() const override { return false; }
  void on_close(std::function<void()>) override {}
  std::vector<std::string> calls;
  Headers headers;
};

const Headers kCors = {{"access-control-allow-origin", "*"}};

TEST(RoutedResponse, AddsTheCorsHeadersToAnswersAndStreams) {
  auto log = std::make_shared<CallLog>();
  RoutedResponse(kCors, log).respond({200, {{"Content-Type", "text/plain"}}, "ok"});
  EXPECT_EQ(log->headers, (Headers{{"Content-Type", "text/plain"}, kCors[0]}));
  RoutedResponse(kCors, log).start_stream(200, {});
  EXPECT_EQ(log->headers, kCors);
}

TEST(RoutedResponse, FailBeforeAnythingWasSentAnswers500) {
  auto log = std::make_shared<CallLog>();
  RoutedResponse response(kCors, log);
  response.fail();
  ASSERT_EQ(log->calls.size(), 1u);
  EXPECT_EQ(log->calls[0],
            R"(respond 500 {"error":"Internal server error","error_type":"internal"})");
  EXPECT_EQ(log->headers.back(), kCors[0]);
  // A sink that outlived the handler is silenced.
  response.respond({200, {}, "late"});
  response.fail();
  EXPECT_EQ(log->calls.size(), 1u);
}

TEST(RoutedResponse, FailEndsAStartedStreamAndSilencesLaterWrites) {
  auto log = std::make_shared<CallLog>();
  RoutedResponse response(kCors, log);
  response.start_stream(200, {});
  response.write("data: 1");
  response.fail();
  response.write("data: 2");
  response.finish();
  EXPECT_EQ(log->calls, (std::vector<std::string>{"start 200", "write data: 1", "finish"}));
}

TEST(RoutedResponse, FailAfterAFinishedAnswerSendsNothing) {
  auto log = std::make_shared<CallLog>();
  RoutedResponse response(kCors, log);
  response.respond({200, {}, "done"});
  response.fail();
  EXPECT_EQ(log->calls, (std::vector<std::string>{"respond 200 done"}));
}

}  // namespace
}  // namespace lm
