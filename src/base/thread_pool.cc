#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace lm {
namespace {

// Tells the core this is a spin-wait (frees the sibling hyper-thread, saves power).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, int spin_us) : spin_us_(std::max(0, spin_us)) {
  if (num_threads <= 0)
    num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

template <typename Done>
void ThreadPool::spin_then_wait(std::condition_variable& cv, Done done) {
  using Clock = std::chrono::steady_clock;
  const bool spin = spin_us_ > 0 && (spin_score_.load(std::memory_order_relaxed) > 0 ||
                                     (waits_.fetch_add(1, std::memory_order_relaxed) & 63) == 0);
  if (spin) {
    const auto deadline = Clock::now() + std::chrono::microseconds(spin_us_);
    for (int i = 0;; ++i) {
      if (done()) {
        if (spin_score_.load(std::memory_order_relaxed) < kMaxSpinScore)
          spin_score_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      cpu_relax();
      if ((i & 63) == 63 && Clock::now() >= deadline) break;
    }
    if (spin_score_.fetch_sub(4, std::memory_order_relaxed) < 4)
      spin_score_.store(0, std::memory_order_relaxed);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  cv.wait(lock, done);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t num_grains = (n + grain - 1) / grain;
  const int64_t threads = std::min<int64_t>(num_threads(), num_grains);
  if (threads <= 1) {
    fn(0, n);
    return;
  }
  const int64_t chunk = ((num_grains + threads - 1) / threads) * grain;
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  pending_.store(static_cast<int>(workers_.size()));
  {
    // Taking the mutex orders this publication against a worker that is between its predicate
    // check and its wait, so no wake-up is lost; spinning workers see generation_ directly.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  fn(0, std::min(chunk, n));
  spin_then_wait(done_, [this] { return pending_.load() == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int worker_idx) {
  uint64_t seen = 0;
  for (;;) {
    spin_then_wait(wake_, [&] { return stop_.load() || generation_.load() != seen; });
    if (stop_.load()) return;
    seen = generation_.load();
    const int64_t begin = std::min(job_n_, job_chunk_ * worker_idx);
    const int64_t end = std::min(job_n_, begin + job_chunk_);
    if (begin < end) (*job_)(begin, end);
    if (pending_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);  // see parallel_for: no lost wake-up
      done_.notify_one();
    }
  }
}

}  // namespace lm
