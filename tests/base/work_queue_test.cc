// WorkQueue: posted tasks run on its threads, concurrently up to the thread count, all of them
// before stop() returns; a task posted after stop() runs on the poster's thread.
#include "base/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

namespace lm {
namespace {

TEST(WorkQueue, RunsTasksOffThePostersThread) {
  WorkQueue queue(2);
  std::promise<std::thread::id> ran_on;
  queue.post([&] { ran_on.set_value(std::this_thread::get_id()); });
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
}

TEST(WorkQueue, RunsAsManyTasksAtOnceAsItHasThreads) {
  // Two tasks that each wait (up to 10 s) for the other to start: each sees the other only if
  // both run at the same time; one after the other, the first times out alone.
  WorkQueue queue(2);
  std::atomic<int> started{0};
  std::promise<bool> a_met, b_met;
  auto rendezvous = [&started](std::promise<bool>& met) {
    ++started;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    met.set_value(started.load() >= 2);
  };
  auto a = a_met.get_future();
  auto b = b_met.get_future();
  queue.post([&] { rendezvous(a_met); });
  queue.post([&] { rendezvous(b_met); });
  EXPECT_TRUE(a.get());
  EXPECT_TRUE(b.get());
}

TEST(WorkQueue, StopRunsEverythingQueuedFirst) {
  std::atomic<int> ran{0};
  {
    WorkQueue queue(1);
    std::promise<void> release;
    std::shared_future<void> gate = release.get_future().share();
    queue.post([gate] { gate.wait(); });  // holds the only thread while the rest queue up
    for (int i = 0; i < 50; ++i) queue.post([&ran] { ++ran; });
    EXPECT_GE(queue.queued(), 49u);
    release.set_value();
    queue.stop();
    EXPECT_EQ(ran.load(), 50);
    EXPECT_EQ(queue.queued(), 0u);
  }
  EXPECT_EQ(ran.load(), 50);
}

TEST(WorkQueue, APostAfterStopRunsOnTheCaller) {
  WorkQueue queue(1);
  queue.stop();
  std::thread::id ran_on;
  queue.post([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(WorkQueue, AThrowingTaskDoesNotStopTheQueue) {
  WorkQueue queue(1);
  queue.post([] { throw std::runtime_error("bad request"); });
  std::promise<void> later;
  queue.post([&] { later.set_value(); });
  EXPECT_EQ(later.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

}  // namespace
}  // namespace lm
