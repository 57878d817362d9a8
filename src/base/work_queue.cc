#include "base/work_queue.h"

#include <exception>
#include <string>
#include <utility>

#include "base/check.h"
#include "base/log.h"

namespace lm {

WorkQueue::WorkQueue(int num_threads) {
  LM_CHECK(num_threads > 0);
  threads_.reserve(static_cast<size_t>(num_threads));
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { run(); });
}

WorkQueue::~WorkQueue() { stop(); }

void WorkQueue::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      tasks_.push_back(std::move(task));
      ready_.notify_one();
      return;
    }
  }
  task();
}

void WorkQueue::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

size_t WorkQueue::queued() const {
  std::lock_guard lock(mutex_);
  return tasks_.size();
}

void WorkQueue::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and everything queued has been taken
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    // A throwing task must not take the thread (and every later task) with it.
    try {
      task();
    } catch (const std::exception& e) {
      log_error(std::string("work queue task threw: ") + e.what());
    }
  }
}

}  // namespace lm
