#include "server/transport/sse_keepalive.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace lm {
namespace {

// Records what reaches the transport.
class RecordingStream : public ResponseStream {
 public:
  void respond(HttpResponse) override {}
  void start_stream(int, std::vector<std::pair<std::string, std::string>>) override {}
  void write(std::string chunk) override {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.push_back(std::move(chunk));
  }
  void finish() override {}
  bool closed() const override { return is_closed; }
  void on_close(std::function<void()>) override {}
  std::vector<std::string> snapshot() {
    std::lock_guard<std::mutex> lock(mutex);
    return chunks;
  }
  std::mutex mutex;
  std::vector<std::string> chunks;
  std::atomic<bool> is_closed{false};
};

TEST(SseKeepAlive, PingsIdleStreamsOnlyUntilFinished) {
  SseKeepAlive keepalive(std::chrono::milliseconds(40));
  auto raw = std::make_shared<RecordingStream>();
  auto stream = keepalive.wrap(raw);
  stream->start_stream(200, {});
  // Two pings come within a few intervals; a loaded machine may take longer, so wait for them
  // (up to 10 s) rather than for a fixed time.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (raw->snapshot().size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto pings = raw->snapshot().size();
  EXPECT_GE(pings, 2u);
  for (const auto& c : raw->snapshot()) EXPECT_EQ(c, ":\n\n");
  const auto before_finish = raw->snapshot().size();
  stream->finish();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_LE(raw->snapshot().size(), before_finish + 1);  // at most one ping raced the finish
}

TEST(SseKeepAlive, BusyStreamsAreNotPinged) {
  SseKeepAlive keepalive(std::chrono::milliseconds(60));
  auto raw = std::make_shared<RecordingStream>();
  auto stream = keepalive.wrap(raw);
  stream->start_stream(200, {});
  for (int i = 0; i < 10; ++i) {
    stream->write("data:x\n\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
  }
  for (const auto& c : raw->snapshot()) EXPECT_EQ(c, "data:x\n\n");
}

TEST(SseKeepAlive, ClosedClientsAndPlainResponsesAreIgnored) {
  SseKeepAlive keepalive(std::chrono::milliseconds(20));
  auto raw = std::make_shared<RecordingStream>();
  auto stream = keepalive.wrap(raw);
  stream->respond({200, {}, "x"});
  auto raw2 = std::make_shared<RecordingStream>();
  auto streamed = keepalive.wrap(raw2);
  streamed->start_stream(200, {});
  raw2->is_closed = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_TRUE(raw->snapshot().empty());
  EXPECT_TRUE(raw2->snapshot().empty());
}

}  // namespace
}  // namespace lm
