#include "server/transport/sse_keepalive.h"

#include <algorithm>
#include <string>

namespace lm {

// The wrapper: forwards everything and remembers when it last wrote.
struct SseKeepAlive::Watched : ResponseStream, std::enable_shared_from_this<SseKeepAlive::Watched> {
  Watched(SseKeepAlive& owner, std::shared_ptr<ResponseStream> wrapped)
      : keepalive(owner), inner(std::move(wrapped)) {}

  void respond(HttpResponse response) override { inner->respond(std::move(response)); }
  void start_stream(int status, std::vector<std::pair<std::string, std::string>> headers) override {
    touch();
    inner->start_stream(status, std::move(headers));
    std::lock_guard<std::mutex> lock(keepalive.mutex_);
    keepalive.streams_.push_back(weak_from_this());
  }
  void write(std::string chunk) override {
    touch();
    inner->write(std::move(chunk));
  }
  void finish() override {
    finished = true;
    inner->finish();
  }
  bool closed() const override { return inner->closed(); }
  void on_close(std::function<void()> callback) override { inner->on_close(std::move(callback)); }

  void touch() {
    std::lock_guard<std::mutex> lock(write_mutex);
    last_write = std::chrono::steady_clock::now();
  }
  // Writes the comment if idle for `interval`; the lock orders it against token writes.
  void ping_if_idle(std::chrono::milliseconds interval) {
    std::lock_guard<std::mutex> lock(write_mutex);
    const auto now = std::chrono::steady_clock::now();
    if (finished || inner->closed() || now - last_write < interval) return;
    last_write = now;
    inner->write(":\n\n");
  }

  SseKeepAlive& keepalive;
  std::shared_ptr<ResponseStream> inner;
  std::mutex write_mutex;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  std::atomic<bool> finished{false};
};

SseKeepAlive::SseKeepAlive(std::chrono::milliseconds interval)
    : interval_(interval), thread_([this] { run(); }) {}

SseKeepAlive::~SseKeepAlive() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<ResponseStream> SseKeepAlive::wrap(std::shared_ptr<ResponseStream> inner) {
  return std::make_shared<Watched>(*this, std::move(inner));
}

void SseKeepAlive::run() {
  const auto tick = std::max(std::chrono::milliseconds(1), interval_ / 4);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, tick, [this] { return stop_; });
    std::vector<std::shared_ptr<Watched>> live;
    for (const auto& weak : streams_) {
      if (auto s = weak.lock(); s && !s->finished && !s->closed()) live.push_back(std::move(s));
    }
    streams_.clear();
    for (const auto& s : live) streams_.push_back(s);
    lock.unlock();
    for (const auto& s : live) s->ping_if_idle(interval_);
    lock.lock();
  }
}

}  // namespace lm
