// The batch exporter: request threads hand finished spans to a bounded queue (never waiting on
// the network: a full queue drops them and counts), one background thread sends them as OTLP/JSON
// batches every interval or as soon as a batch is full, and shutdown() sends what is left. Made
// only when --otlp-endpoint is set: without it no exporter and no thread exist.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "server/tracing/span.h"

namespace lm {

// Where batches go: one OTLP/JSON ExportTraceServiceRequest body per call, on the exporter's
// thread. An Error says why the receiver did not take it (logged, the batch is not retried).
class SpanSender {
 public:
  virtual ~SpanSender() = default;
  virtual Status send(const std::string& body) = 0;
};

class SpanExporter {
 public:
  struct Options {
    size_t max_queue_spans = 2048;  // spans waiting; more are dropped
    size_t max_batch_spans = 512;   // a full batch is sent at once
    std::chrono::milliseconds interval{1000};
  };
  struct Stats {
    uint64_t sent = 0;     // spans the receiver accepted
    uint64_t dropped = 0;  // spans refused because the queue was full or the exporter stopped
    uint64_t failed = 0;   // spans whose batch the receiver refused or could not be reached
  };

  SpanExporter(std::string service_name, std::unique_ptr<SpanSender> sender, Options options);
  SpanExporter(std::string service_name, std::unique_ptr<SpanSender> sender)
      : SpanExporter(std::move(service_name), std::move(sender), Options{}) {}
  ~SpanExporter();  // shutdown()
  SpanExporter(const SpanExporter&) = delete;
  SpanExporter& operator=(const SpanExporter&) = delete;

  // Queues one request's spans for the next batch, all or none: false (and counted as dropped)
  // when they do not fit or the exporter has shut down. Holds a lock only to append.
  bool export_spans(std::vector<Span> spans);
  // Sends everything queued (stopping at the first failed batch), then ends the thread. Called
  // after the server drained; later spans are dropped. Idempotent.
  void shutdown();
  Stats stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  std::vector<Span> take_batch();      // mutex held
  bool send_batch(std::vector<Span>);  // mutex not held
  void log_problems(Clock::time_point now);

  const std::string service_name_;
  const std::unique_ptr<SpanSender> sender_;
  const Options options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Span> queue_;
  bool stopping_ = false;
  Stats stats_;
  // Rate-limited warnings (exporter thread only): what was logged, and when.
  uint64_t logged_dropped_ = 0;
  uint64_t logged_failed_ = 0;
  std::string last_error_;
  std::optional<Clock::time_point> last_log_;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace lm
