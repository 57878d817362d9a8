// TGI sends an SSE comment (":\n\n") on a stream that has been silent for 15 s, so proxies and
// clients do not time out while a request waits in the queue. SseKeepAlive wraps responses: once
// a wrapped response starts a stream, one background thread writes the comment whenever that
// stream has been idle for the interval, until it finishes or its client goes away.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/transport/http_types.h"

namespace lm {

class SseKeepAlive {
 public:
  explicit SseKeepAlive(std::chrono::milliseconds interval = std::chrono::seconds(15));
  ~SseKeepAlive();
  SseKeepAlive(const SseKeepAlive&) = delete;
  SseKeepAlive& operator=(const SseKeepAlive&) = delete;

  // A response that reports its writes here; streams are watched from start_stream to finish.
  std::shared_ptr<ResponseStream> wrap(std::shared_ptr<ResponseStream> inner);

 private:
  struct Watched;
  void run();

  const std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::weak_ptr<Watched>> streams_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace lm
