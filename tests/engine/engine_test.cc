// Engine with a fake executor: concurrent submission, per-sink token order and finish, stopping
// by sink, cancellation, executor failure, stop/drain, and an idle engine thread that sleeps.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace lm {
namespace {

using namespace std::chrono_literals;

// The token the fake model "samples" for a sequence whose next position is `position`.
int32_t fake_token(int32_t first_prompt_id, int64_t position) {
  return first_prompt_id * 1000 + static_cast<int32_t>(position);
}

constexpr int32_t kPoisonId = 666;  // a batch holding a prompt starting with it fails

// Deterministic executor: token = fake_token(prompt[0], position); records what it holds.
class FakeExecutor : public Executor {
 public:
  Status check_request(const EngineRequest& request) const override {
    if (request.prompt_ids[0] < 0) return Error{"negative id"};
    return {};
  }

  Result<std::vector<SampleResult>> execute(const ScheduledBatch& batch) override {
    {
      std::unique_lock lock(mutex_);
      ++num_executes_;
      entered_.notify_all();
      gate_cv_.wait(lock, [&] { return gate_open_; });
    }
    std::vector<SampleResult> out;
    for (const ScheduledSequence& entry : batch.sequences) {
      const int32_t first_id = entry.sequence->request.prompt_ids[0];
      if (first_id == kPoisonId) return Error{"the fake executor failed"};
      {
        std::lock_guard lock(mutex_);
        live_.insert(entry.seq_id);
        tables_[entry.seq_id] = entry.block_table;
        max_batch_size_ = std::max(max_batch_size_, static_cast<int64_t>(batch.sequences.size()));
      }
      if (!entry.samples) continue;
      SampleResult token;
      token.id = fake_token(first_id, entry.first_position + entry.num_tokens);
      token.logprob = -0.5f;
      out.push_back(token);
    }
    return out;
  }

  void release(int64_t seq_id) override {
    std::lock_guard lock(mutex_);
    live_.erase(seq_id);
    tables_.erase(seq_id);
    released_.insert(seq_id);
  }

  void return_blocks(const std::vector<int32_t>& block_ids) override {
    std::lock_guard lock(mutex_);
    for (int32_t id : block_ids) {
      // Never a block a live sequence's table held when it last computed.
      for (const auto& [seq_id, table] : tables_) {
        EXPECT_EQ(std::ranges::count(table, id), 0)
            << "block " << id << " returned while sequence " << seq_id << " holds it";
      }
      returned_.push_back(id);
    }
  }
  std::vector<int32_t> returned() const {
    std::lock_guard lock(mutex_);
    return returned_;
  }

  void set_gate(bool open) {
    {
      std::lock_guard lock(mutex_);
      gate_open_ = open;
    }
    gate_cv_.notify_all();
  }
  void wait_entered(int64_t num_executes) {
    std::unique_lock lock(mutex_);
    entered_.wait(lock, [&] { return num_executes_ >= num_executes; });
  }
  size_t num_live() const {
    std::lock_guard lock(mutex_);
    return live_.size();
  }
  size_t num_released() const {
    std::lock_guard lock(mutex_);
    return released_.size();
  }
  int64_t max_batch_size() const {
    std::lock_guard lock(mutex_);
    return max_batch_size_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable gate_cv_;
  std::condition_variable entered_;
  bool gate_open_ = true;
  int64_t num_executes_ = 0;
  std::set<int64_t> live_;
  std::set<int64_t> released_;
  std::map<int64_t, std::vector<int32_t>> tables_;  // live sequences' last block tables
  std::vector<int32_t> returned_;
  int64_t max_batch_size_ = 0;
};

// Records every call; optionally stops after `stop_after` tokens or cancels itself after
// `cancel_after` tokens.
class RecordingSink : public TokenSink {
 public:
  int64_t stop_after = -1;
  int64_t cancel_after = -1;

  bool on_token(const TokenEvent& event) override {
    std::lock_guard lock(mutex_);
    EXPECT_FALSE(done_) << "a token after the end";
    ids_.push_back(event.token.id);
    const auto n = static_cast<int64_t>(ids_.size());
    if (event.finish_reason) {
      finish_reason_ = event.finish_reason;
      finish();
    }
    if (n == cancel_after) cancelled_ = true;
    if (n == stop_after) {
      finish();
      return false;
    }
    return true;
  }
  void on_error(const std::string& message) override {
    std::lock_guard lock(mutex_);
    EXPECT_FALSE(done_) << "an error after the end";
    errors_.push_back(message);
    finish();
  }
  bool cancelled() const override { return cancelled_; }
  void cancel() { cancelled_ = true; }

  bool wait_done() {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, 10s, [&] { return done_; });
  }
  std::vector<int32_t> ids() const {
    std::lock_guard lock(mutex_);
    return ids_;
  }
  std::optional<FinishReason> finish_reason() const {
    std::lock_guard lock(mutex_);
    return finish_reason_;
  }
  std::vector<std::string> errors() const {
    std::lock_guard lock(mutex_);
    return errors_;
  }

 private:
  void finish() {
    done_ = true;
    cv_.notify_all();
  }
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<int32_t> ids_;
  std::optional<FinishReason> finish_reason_;
  std::vector<std::string> errors_;
  std::atomic<bool> cancelled_{false};
};

EngineRequest request(int32_t first_id, int64_t prompt_len, int64_t max_new_tokens) {
  EngineRequest r;
  for (int64_t i = 0; i < prompt_len; ++i) r.prompt_ids.push_back(first_id);
  r.max_new_tokens = max_new_tokens;
  return r;
}

std::vector<int32_t> expected_ids(int32_t first_id, int64_t prompt_len, int64_t num_tokens) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < num_tokens; ++i) ids.push_back(fake_token(first_id, prompt_len + i));
  return ids;
}

bool wait_until(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

struct EngineFixture {
  explicit EngineFixture(EngineConfig config = small_config()) {
    auto owned = std::make_unique<FakeExecutor>();
    executor = owned.get();
    engine = std::make_unique<Engine>(std::move(config), std::move(owned));
  }
  static EngineConfig small_config() {
    EngineConfig c;
    c.max_batch_size = 4;
    c.max_batch_prefill_tokens = 8;
    c.max_batch_total_tokens = 64;
    c.block_size = 4;
    c.num_blocks = 64 / 4 + 1;  // 64 slots besides the reserved block
    return c;
  }
  bool idle() const {
    const EngineStats s = engine->stats();
    return s.num_waiting == 0 && s.num_running == 0 && s.num_reserved_tokens == 0 &&
           executor->num_live() == 0;
  }
  FakeExecutor* executor;
  std::unique_ptr<Engine> engine;
};

TEST(Engine, ConcurrentSubmittersEachGetExactlyTheirTokensThenFinish) {
  EngineFixture f;
  constexpr int kThreads = 6;
  constexpr int kPerThread = 20;
  std::vector<std::shared_ptr<RecordingSink>> sinks(kThreads * kPerThread);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int idx = t * kPerThread + i;
        sinks[static_cast<size_t>(idx)] = std::make_shared<RecordingSink>();
        // Prompts up to 20 tokens against a prefill budget of 8: many are chunked.
        EXPECT_TRUE(f.engine
                        ->submit(request(idx + 1, 1 + idx % 20, 1 + idx % 7),
                                 sinks[static_cast<size_t>(idx)])
                        .ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int idx = 0; idx < kThreads * kPerThread; ++idx) {
    RecordingSink& sink = *sinks[static_cast<size_t>(idx)];
    ASSERT_TRUE(sink.wait_done()) << idx;
    EXPECT_EQ(sink.ids(), expected_ids(idx + 1, 1 + idx % 20, 1 + idx % 7)) << idx;
    EXPECT_EQ(sink.finish_reason(), FinishReason::kLength) << idx;
    EXPECT_TRUE(sink.errors().empty());
  }
  EXPECT_TRUE(wait_until([&] { return f.idle(); }));
  EXPECT_EQ(f.executor->num_released(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_LE(f.executor->max_batch_size(), 4);
  EXPECT_GT(f.executor->max_batch_size(), 1);  // requests really were batched together
}

TEST(Engine, EosFromTheConfigFinishesASequence) {
  EngineConfig config = EngineFixture::small_config();
  config.eos_token_ids = {fake_token(7, 5)};  // the third token of a 3-token prompt of 7s
  EngineFixture f(config);
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(f.engine->submit(request(7, 3, 10), sink).ok());
  ASSERT_TRUE(sink->wait_done());
  EXPECT_EQ(sink->ids(), expected_ids(7, 3, 3));
  EXPECT_EQ(sink->finish_reason(), FinishReason::kEosToken);
}

TEST(Engine, ASinkReturningFalseStopsOnlyItsSequence) {
  EngineFixture f;
  auto stopping = std::make_shared<RecordingSink>();
  stopping->stop_after = 2;
  auto other = std::make_shared<RecordingSink>();
  ASSERT_TRUE(f.engine->submit(request(1, 4, 10), stopping).ok());
  ASSERT_TRUE(f.engine->submit(request(2, 4, 10), other).ok());
  ASSERT_TRUE(other->wait_done());
  EXPECT_EQ(stopping->ids(), expected_ids(1, 4, 2));
  EXPECT_FALSE(stopping->finish_reason());
  EXPECT_EQ(other->ids(), expected_ids(2, 4, 10));
  EXPECT_EQ(other->finish_reason(), FinishReason::kLength);
  EXPECT_TRUE(wait_until([&] { return f.idle(); }));
}

TEST(Engine, CancelledSequencesAreReleasedWithoutAnotherCall) {
  EngineFixture f;
  auto running = std::make_shared<RecordingSink>();
  running->cancel_after = 3;  // cancelled while running
  auto queued = std::make_shared<RecordingSink>();
  queued->cancel();  // gone before it was ever admitted
  ASSERT_TRUE(f.engine->submit(request(1, 4, 40), running).ok());
  ASSERT_TRUE(f.engine->submit(request(2, 4, 40), queued).ok());
  EXPECT_TRUE(wait_until([&] { return f.idle() && f.executor->num_released() == 2; }));
  EXPECT_EQ(running->ids(), expected_ids(1, 4, 3));
  EXPECT_FALSE(running->finish_reason());
  EXPECT_TRUE(running->errors().empty());
  EXPECT_TRUE(queued->ids().empty());
  EXPECT_TRUE(queued->errors().empty());
}

TEST(Engine, ExecutorFailureFailsItsBatchAndTheEngineGoesOn) {
  EngineFixture f;
  auto poisoned = std::make_shared<RecordingSink>();
  ASSERT_TRUE(f.engine->submit(request(kPoisonId, 2, 5), poisoned).ok());
  ASSERT_TRUE(poisoned->wait_done());
  EXPECT_EQ(poisoned->errors(), std::vector<std::string>{"the fake executor failed"});
  EXPECT_TRUE(poisoned->ids().empty());
  EXPECT_TRUE(wait_until([&] { return f.idle(); }));

  auto healthy = std::make_shared<RecordingSink>();
  ASSERT_TRUE(f.engine->submit(request(3, 2, 5), healthy).ok());
  ASSERT_TRUE(healthy->wait_done());
  EXPECT_EQ(healthy->ids(), expected_ids(3, 2, 5));
}

TEST(Engine, SubmitRejectsRequestsThatCanNeverRun) {
  EngineFixture f;
  auto sink = std::make_shared<RecordingSink>();
  Status empty = f.engine->submit(request(1, 0, 5), sink);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "the prompt is empty");
  Status too_big = f.engine->submit(request(1, 10, 55), sink);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.error().message,
            "the prompt (10 tokens) plus max_new_tokens (55) exceeds max_batch_total_tokens (64)");
  EXPECT_FALSE(f.engine->submit(request(-1, 2, 5), sink).ok());  // the executor's check
  EXPECT_TRUE(f.engine->submit(request(1, 10, 54), sink).ok());
  EXPECT_TRUE(sink->wait_done());
}

TEST(Engine, SubmitRejectsRequestsLargerThanTheKvCache) {
  EngineConfig config = EngineFixture::small_config();
  config.num_blocks = 5;  // 4 usable blocks of 4 tokens
  EngineFixture f(config);
  auto sink = std::make_shared<RecordingSink>();
  Status too_big = f.engine->submit(request(1, 10, 8), sink);  // positions 0..16
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.error().message,
            "the prompt (10 tokens) plus max_new_tokens (8) needs 5 KV cache blocks but the cache "
            "has 4");
  ASSERT_TRUE(f.engine->submit(request(1, 10, 7), sink).ok());
  ASSERT_TRUE(sink->wait_done());
  EXPECT_EQ(sink->ids(), expected_ids(1, 10, 7));
}

TEST(Engine, StatsCountBlocksAndPrefixCacheHits) {
  EngineFixture f;
  for (int i = 0; i < 2; ++i) {  // the second run finds the first's full prompt block cached
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_TRUE(f.engine->submit(request(3, 8, 2), sink).ok());
    ASSERT_TRUE(sink->wait_done());
    EXPECT_EQ(sink->ids(), expected_ids(3, 8, 2));
    EXPECT_TRUE(wait_until([&] { return f.idle(); }));
  }
  const EngineStats s = f.engine->stats();
  EXPECT_EQ(s.num_blocks_total, 16);
  EXPECT_EQ(s.num_blocks_used, 0);
  EXPECT_EQ(s.prefix_cache_query_tokens, 16);
  EXPECT_EQ(s.prefix_cache_hit_tokens, 4);  // whole blocks, leaving the last one to compute
  EXPECT_EQ(s.num_preemptions, 0);
}

TEST(Engine, UnusedCachedBlocksPastTheBudgetAreHandedToTheExecutor) {
  EngineConfig config = EngineFixture::small_config();
  config.max_cached_blocks = 2;
  EngineFixture f(config);
  // Three different 8-token prompts, one after another: each leaves 2 full cached blocks.
  for (int32_t first_id : {3, 4, 5}) {
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_TRUE(f.engine->submit(request(first_id, 8, 2), sink).ok());
    ASSERT_TRUE(sink->wait_done());
    EXPECT_EQ(sink->ids(), expected_ids(first_id, 8, 2));
    EXPECT_TRUE(wait_until([&] { return f.idle(); }));
  }
  // Each request's blocks: 2 prompt blocks cached, then the rest (the generated tokens' block)
  // freed. Only the last prompt's 2 cached blocks stay; the first two prompts' were handed back.
  EXPECT_EQ(f.executor->returned().size(), 4u);
  const EngineStats s = f.engine->stats();
  EXPECT_EQ(s.num_blocks_used, 0);
  // Resident: the 2 cached blocks and the freed block every request reused.
  EXPECT_EQ(s.num_blocks_resident, 3);
  // The latest prompt is still a cache hit; the first is not.
  for (auto [first_id, hit] : {std::pair{5, 4}, std::pair{3, 0}}) {
    const int64_t before = f.engine->stats().prefix_cache_hit_tokens;
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_TRUE(f.engine->submit(request(first_id, 8, 2), sink).ok());
    ASSERT_TRUE(sink->wait_done());
    EXPECT_EQ(sink->ids(), expected_ids(first_id, 8, 2));
    EXPECT_TRUE(wait_until([&] { return f.idle(); }));
    EXPECT_EQ(f.engine->stats().prefix_cache_hit_tokens - before, hit) << first_id;
  }
}

TEST(Engine, DrainFinishesQueuedAndRunningWorkThenRefusesMore) {
  EngineFixture f;
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 10; ++i) {  // more than max_batch_size: some wait in the queue
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(f.engine->submit(request(i + 1, 3, 6), sinks.back()).ok());
  }
  f.engine->drain();
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(sinks[static_cast<size_t>(i)]->ids(), expected_ids(i + 1, 3, 6));
    EXPECT_EQ(sinks[static_cast<size_t>(i)]->finish_reason(), FinishReason::kLength);
  }
  EXPECT_TRUE(f.idle());
  Status late = f.engine->submit(request(1, 3, 6), std::make_shared<RecordingSink>());
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().message, Engine::kShuttingDownMessage);
  f.engine->stop();  // a second shutdown is harmless
}

TEST(Engine, StopFailsPendingRequests) {
  EngineFixture f;
  f.executor->set_gate(false);
  auto running = std::make_shared<RecordingSink>();
  ASSERT_TRUE(f.engine->submit(request(1, 3, 50), running).ok());
  f.executor->wait_entered(1);  // the first step is inside execute
  auto queued = std::make_shared<RecordingSink>();
  ASSERT_TRUE(f.engine->submit(request(2, 3, 50), queued).ok());
  std::thread stopper([&] { f.engine->stop(); });
  // Let stop() set its flag before the step can finish; either order must fail both requests.
  std::this_thread::sleep_for(50ms);
  f.executor->set_gate(true);
  stopper.join();
  for (const auto& sink : {running, queued}) {
    EXPECT_EQ(sink->errors(), std::vector<std::string>{Engine::kShuttingDownMessage});
    EXPECT_FALSE(sink->finish_reason());
    EXPECT_LT(sink->ids().size(), 50u);
  }
  EXPECT_TRUE(f.idle());
  EXPECT_EQ(f.executor->num_released(), 2u);
}

TEST(Engine, TheEngineThreadSleepsWhenIdle) {
  EngineFixture f;
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(f.engine->stats().total_steps, 0);
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(f.engine->submit(request(1, 2, 3), sink).ok());
  ASSERT_TRUE(sink->wait_done());
  EXPECT_TRUE(wait_until([&] { return f.idle(); }));
  const int64_t steps = f.engine->stats().total_steps;
  EXPECT_EQ(steps, 3);  // one prefill, two decodes
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(f.engine->stats().total_steps, steps);
}

TEST(Engine, StatsShowTheRunningBatch) {
  EngineFixture f;
  f.executor->set_gate(false);
  auto a = std::make_shared<RecordingSink>();
  auto b = std::make_shared<RecordingSink>();
  ASSERT_TRUE(f.engine->submit(request(1, 3, 4), a).ok());
  f.executor->wait_entered(1);
  EngineStats s = f.engine->stats();  // published before execute
  EXPECT_EQ(s.num_running, 1);
  EXPECT_EQ(s.num_waiting, 0);
  EXPECT_EQ(s.num_batch_tokens, 3);
  EXPECT_EQ(s.num_reserved_tokens, 7);
  EXPECT_EQ(s.total_steps, 1);
  ASSERT_TRUE(f.engine->submit(request(2, 5, 4), b).ok());
  EXPECT_EQ(f.engine->stats().num_waiting, 1);  // b sits in the inbox
  f.executor->set_gate(true);
  // After a's prefill, the next step decodes a and prefills b.
  ASSERT_TRUE(b->wait_done());
  ASSERT_TRUE(a->wait_done());
  EXPECT_TRUE(wait_until([&] { return f.idle(); }));
  s = f.engine->stats();
  EXPECT_EQ(s.num_batch_tokens, 1);  // the last step decoded b alone
  EXPECT_EQ(s.total_steps, 5);       // a ran steps 1-4; b joined at step 2 and ran 2-5
}

}  // namespace
}  // namespace lm
