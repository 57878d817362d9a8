// A few threads running posted tasks in arrival order. The HTTP server's I/O threads must never
// block, yet admitting a request (chat template, tokenization, grammar compilation: a complex JSON
// schema takes tens to hundreds of milliseconds) is real work; TGI runs it on its validation
// workers (`--validation-workers`), and so do we. Unlike ThreadPool (data-parallel kernel work,
// one caller at a time), tasks here are independent and any thread may post.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lm {

class WorkQueue {
 public:
  explicit WorkQueue(int num_threads);
  ~WorkQueue();  // stop()
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `task`; a free thread runs it. After stop(), runs it on the caller's thread: nothing
  // posted is ever dropped (a dropped handler would leave its client without an answer).
  void post(std::function<void()> task);

  // Runs what is queued, then joins the threads. Idempotent.
  void stop();

  size_t queued() const;  // posted and not yet started

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;  // guarded by mutex_, as is stopping_
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace lm
