#include "server/tracing/span_exporter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

namespace lm {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// Records each body; `hold()` makes send() wait until `release()`; `fail` refuses every batch.
class FakeSender : public SpanSender {
 public:
  struct Shared {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::string> bodies;
    int calls = 0;
    bool held = false;
    bool fail = false;
    bool in_send = false;
  };
  explicit FakeSender(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  Status send(const std::string& body) override {
    std::unique_lock<std::mutex> lock(shared_->mutex);
    ++shared_->calls;
    shared_->in_send = true;
    shared_->changed.notify_all();
    shared_->changed.wait(lock, [&] { return !shared_->held; });
    shared_->in_send = false;
    if (shared_->fail) return Error{"collector said no"};
    shared_->bodies.push_back(body);
    return {};
  }

 private:
  std::shared_ptr<Shared> shared_;
};

struct Harness {
  std::shared_ptr<FakeSender::Shared> shared = std::make_shared<FakeSender::Shared>();
  std::unique_ptr<SpanExporter> exporter;
  explicit Harness(SpanExporter::Options options) {
    exporter = std::make_unique<SpanExporter>("svc", std::make_unique<FakeSender>(shared), options);
  }
  // Waits (up to 5 s) until `done` holds under the sender's lock.
  template <typename Pred>
  bool wait_for(Pred done) {
    std::unique_lock<std::mutex> lock(shared->mutex);
    return shared->changed.wait_for(lock, 5s, [&] { return done(*shared); });
  }
  void hold() {
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->held = true;
  }
  void release() {
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->held = false;
    shared->changed.notify_all();
  }
  // Span counts of the bodies sent so far.
  std::vector<size_t> batch_sizes() {
    std::lock_guard<std::mutex> lock(shared->mutex);
    std::vector<size_t> sizes;
    for (const std::string& body : shared->bodies)
      sizes.push_back(json::parse(body)["resourceSpans"][0]["scopeSpans"][0]["spans"].size());
    return sizes;
  }
};

std::vector<Span> spans(size_t n, const std::string& name = "s") {
  std::vector<Span> out(n);
  for (Span& span : out) {
    span.trace_id = random_trace_id();
    span.span_id = random_span_id();
    span.name = name;
  }
  return out;
}

bool stats_reach(SpanExporter& exporter, uint64_t sent) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (exporter.stats().sent < sent) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(SpanExporter, SendsFullBatchesAtOnceAndTheRestOnShutdown) {
  Harness h({.max_queue_spans = 100, .max_batch_spans = 2, .interval = 1h});
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(h.exporter->export_spans(spans(1)));
  ASSERT_TRUE(stats_reach(*h.exporter, 4));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(h.exporter->stats().sent, 4u);  // the odd one waits for the interval
  EXPECT_EQ(h.batch_sizes(), (std::vector<size_t>{2, 2}));
  h.exporter->shutdown();  // the flush
  EXPECT_EQ(h.exporter->stats().sent, 5u);
  EXPECT_EQ(h.batch_sizes(), (std::vector<size_t>{2, 2, 1}));
  // After shutdown spans are dropped and counted.
  EXPECT_FALSE(h.exporter->export_spans(spans(2)));
  EXPECT_EQ(h.exporter->stats().dropped, 2u);
}

TEST(SpanExporter, SendsAPartialBatchOnTheInterval) {
  Harness h({.max_queue_spans = 100, .max_batch_spans = 512, .interval = 20ms});
  ASSERT_TRUE(h.exporter->export_spans(spans(3)));
  ASSERT_TRUE(stats_reach(*h.exporter, 3));
  EXPECT_EQ(h.batch_sizes(), (std::vector<size_t>{3}));
  const json body = json::parse(h.shared->bodies[0]);
  EXPECT_EQ(body["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"], "svc");
}

TEST(SpanExporter, AFullQueueDropsInsteadOfWaiting) {
  Harness h({.max_queue_spans = 4, .max_batch_spans = 1, .interval = 1h});
  h.hold();
  ASSERT_TRUE(h.exporter->export_spans(spans(1, "first")));
  ASSERT_TRUE(h.wait_for([](const FakeSender::Shared& s) { return s.in_send; }));
  // The sender is stuck: the queue fills up, then refuses without blocking the caller.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(h.exporter->export_spans(spans(1)));
  EXPECT_FALSE(h.exporter->export_spans(spans(1)));
  EXPECT_FALSE(h.exporter->export_spans(spans(2)));  // a request's spans: all or none
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(h.exporter->stats().dropped, 3u);
  h.release();
  h.exporter->shutdown();
  const SpanExporter::Stats stats = h.exporter->stats();
  EXPECT_EQ(stats.sent, 5u);
  EXPECT_EQ(stats.dropped, 3u);
  EXPECT_EQ(stats.failed, 0u);
}

TEST(SpanExporter, AFailingReceiverIsCountedAndNotWaitedOnAtShutdown) {
  Harness h({.max_queue_spans = 100, .max_batch_spans = 1, .interval = 1h});
  {
    std::lock_guard<std::mutex> lock(h.shared->mutex);
    h.shared->fail = true;
  }
  h.hold();
  ASSERT_TRUE(h.exporter->export_spans(spans(1)));
  ASSERT_TRUE(h.wait_for([](const FakeSender::Shared& s) { return s.in_send; }));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.exporter->export_spans(spans(1)));
  std::thread stopper([&] { h.exporter->shutdown(); });
  std::this_thread::sleep_for(100ms);  // shutdown is waiting for the stuck send
  h.release();
  stopper.join();
  // The stuck batch failed, the flush tried one more, failed, and dropped the other two.
  const SpanExporter::Stats stats = h.exporter->stats();
  EXPECT_EQ(stats.sent, 0u);
  EXPECT_EQ(stats.failed, 2u);
  EXPECT_EQ(stats.dropped, 2u);
  EXPECT_EQ(h.shared->calls, 2);
}

}  // namespace
}  // namespace lm
