// A persistent pool of worker threads for data-parallel kernels. parallel_for splits [0, n) into
// contiguous ranges, one per thread (the caller takes the first), and returns when all are done.
// Workers spin briefly after each job before they sleep: a decode step issues hundreds of small
// parallel_for calls, and waking a sleeping thread costs more than many of them take (measured:
// 61 -> 170+ tokens/s for the default model's single-stream decode on 2 cores). Spinning only pays
// when the other threads are running; when the cores are oversubscribed, waits outlast the spin
// and it is wasted, so the pool scores its spins and stops spinning (probing now and then) while
// most of them time out.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lm {

class ThreadPool {
 public:
  // num_threads counts the calling thread; 0 means one per hardware thread. spin_us: how long an
  // idle worker (or the caller waiting for workers) polls before it blocks.
  explicit ThreadPool(int num_threads = 0, int spin_us = kDefaultSpinMicroseconds);
  static constexpr int kDefaultSpinMicroseconds = 30;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n). Ranges are multiples of `grain`
  // (except the last) so kernels can keep block-aligned work. One caller at a time.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

 private:
  void worker_loop(int worker_idx);
  // Polls `done` for spin_us_, then waits on `cv` under mutex_ until done() holds.
  template <typename Done>
  void spin_then_wait(std::condition_variable& cv, Done done);

  const int spin_us_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;  // guards only the sleeping side of wake-ups
  std::condition_variable wake_;
  std::condition_variable done_;
  // The current job, published by a release store of generation_.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_chunk_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers that have not finished the current job
  std::atomic<bool> stop_{false};
  // Spin success score in [0, kMaxSpinScore]: +1 per wait that a spin ended, -4 per spin that
  // timed out; at 0 only every 64th wait spins (to notice when the cores are free again).
  static constexpr int kMaxSpinScore = 64;
  std::atomic<int> spin_score_{kMaxSpinScore};
  std::atomic<uint32_t> waits_{0};
};

}  // namespace lm
