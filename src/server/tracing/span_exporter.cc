#include "server/tracing/span_exporter.h"

#include <fmt/format.h>

#include "base/log.h"
#include "server/tracing/otlp_json.h"

namespace lm {
namespace {

// At most one warning about lost spans per this long (a collector that is down would otherwise
// log every second).
constexpr std::chrono::seconds kLogEvery{10};

}  // namespace

SpanExporter::SpanExporter(std::string service_name, std::unique_ptr<SpanSender> sender,
                           Options options)
    : service_name_(std::move(service_name)),
      sender_(std::move(sender)),
      options_(options),
      thread_([this] { run(); }) {}

SpanExporter::~SpanExporter() { shutdown(); }

bool SpanExporter::export_spans(std::vector<Span> spans) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() + spans.size() > options_.max_queue_spans) {
      stats_.dropped += spans.size();
      return false;
    }
    const bool was_short = queue_.size() < options_.max_batch_spans;
    for (Span& span : spans) queue_.push_back(std::move(span));
    wake = was_short && queue_.size() >= options_.max_batch_spans;  // a batch just filled up
  }
  if (wake) wake_.notify_one();
  return true;
}

void SpanExporter::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

SpanExporter::Stats SpanExporter::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::vector<Span> SpanExporter::take_batch() {
  const size_t n = std::min(queue_.size(), options_.max_batch_spans);
  std::vector<Span> batch(std::make_move_iterator(queue_.begin()),
                          std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
  return batch;
}

bool SpanExporter::send_batch(std::vector<Span> batch) {
  Status sent = sender_->send(otlp_traces_json(batch, service_name_));
  std::lock_guard<std::mutex> lock(mutex_);
  if (sent.ok()) {
    stats_.sent += batch.size();
    return true;
  }
  stats_.failed += batch.size();
  last_error_ = sent.error().message;
  return false;
}

void SpanExporter::run() {
  auto due = Clock::now() + options_.interval;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_until(lock, due,
                     [&] { return stopping_ || queue_.size() >= options_.max_batch_spans; });
    if (stopping_) break;
    const auto now = Clock::now();
    // On the interval everything queued goes; between intervals only full batches do.
    const size_t keep = now >= due ? 0 : options_.max_batch_spans - 1;
    if (now >= due) due = now + options_.interval;
    while (queue_.size() > keep && !stopping_) {
      std::vector<Span> batch = take_batch();
      lock.unlock();
      send_batch(std::move(batch));
      lock.lock();
    }
    lock.unlock();
    log_problems(Clock::now());
    lock.lock();
  }
  // The flush: what request threads queued before shutdown. A receiver that fails once is not
  // waited on again (the process is exiting): the rest counts as dropped.
  while (!queue_.empty()) {
    std::vector<Span> batch = take_batch();
    lock.unlock();
    const bool sent = send_batch(std::move(batch));
    lock.lock();
    if (!sent) {
      stats_.dropped += queue_.size();
      queue_.clear();
    }
  }
  lock.unlock();
  last_log_.reset();  // the last word is always said
  log_problems(Clock::now());
}

void SpanExporter::log_problems(Clock::time_point now) {
  if (last_log_ && now - *last_log_ < kLogEvery) return;
  Stats stats;
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats = stats_;
    error = last_error_;
  }
  if (stats.failed == logged_failed_ && stats.dropped == logged_dropped_) return;
  if (stats.failed > logged_failed_) {
    log_warn(fmt::format("Could not export {} spans: {}", stats.failed - logged_failed_, error));
  }
  if (stats.dropped > logged_dropped_) {
    log_warn(fmt::format(
        "Dropped {} spans: the export queue was full ({} spans) or the exporter had stopped",
        stats.dropped - logged_dropped_, options_.max_queue_spans));
  }
  logged_failed_ = stats.failed;
  logged_dropped_ = stats.dropped;
  last_log_ = now;
}

}  // namespace lm
