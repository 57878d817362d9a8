// Engine: owns the Scheduler, the Executor and the one engine thread that runs steps. Any thread
// may submit requests and read stats; only the engine thread schedules, executes and calls sinks.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "engine/engine_config.h"
#include "engine/engine_request.h"
#include "engine/executor.h"
#include "engine/scheduler.h"
#include "engine/step_stats.h"
#include "engine/token_sink.h"

namespace lm {

// A snapshot for /metrics, taken when a step has scheduled its batch and again when it ends
// (and on submit, for the queue size).
struct EngineStats {
  int64_t num_waiting = 0;          // queued, not yet admitted
  int64_t num_running = 0;          // admitted, not finished
  int64_t num_batch_tokens = 0;     // tokens computed by the last step
  int64_t num_reserved_tokens = 0;  // prompt + max_new_tokens over running sequences
  int64_t total_steps = 0;          // steps run since start
  int64_t num_blocks_used = 0;      // KV blocks referenced by running sequences
  int64_t num_blocks_total = 0;     // usable KV blocks (block 0 is reserved)
  int64_t num_blocks_resident = 0;  // KV blocks written and not handed back since
  // Counters since start: tokens looked up in the prefix cache on admission and those found.
  int64_t prefix_cache_query_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;
  int64_t num_preemptions = 0;  // running sequences sent back to the queue for lack of blocks
  // Speculative decoding since start: tokens proposed and verified, and those accepted.
  int64_t num_proposed_tokens = 0;
  int64_t num_accepted_tokens = 0;
};

class Engine {
 public:
  // Starts the engine thread; it sleeps until a request arrives. `observer`, if set, gets the
  // StepStats of every step that computed a batch, on the engine thread, after the step.
  // `proposer` makes the speculative proposals when config.speculate > 0 (null: n-gram).
  Engine(EngineConfig config, std::unique_ptr<Executor> executor, StepObserver observer = {},
         std::unique_ptr<Proposer> proposer = nullptr);
  // stop()s if neither stop() nor drain() ran.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; `sink` then receives its tokens on the engine thread. Fails at once when
  // the request can never run (empty prompt, no new tokens, over the batch token budget or the KV
  // cache, rejected by the executor) or the engine no longer accepts work.
  Status submit(EngineRequest request, std::shared_ptr<TokenSink> sink);

  // Stops accepting requests, finishes every queued and running one, then joins the thread.
  void drain();
  // Stops accepting requests, fails every queued and running one with on_error, joins the thread.
  void stop();

  EngineStats stats() const;

  static constexpr const char* kShuttingDownMessage = "the engine is shutting down";

 private:
  enum class Mode { kRunning, kDraining, kStopping };
  struct Submission {
    EngineRequest request;
    std::shared_ptr<TokenSink> sink;
  };

  void run();
  void step();
  // Tells the sinks of the sequences the batch admitted that they left the queue.
  void notify_admitted(const ScheduledBatch& batch);
  // Hands the executor the blocks the scheduler dropped from the prefix cache for its budget.
  void return_blocks();
  // Executes the batch, applies and delivers its results (or fails it), timing each part.
  void compute(const ScheduledBatch& batch, StepStats& stats);
  void drop_cancelled();
  // Hands out's tokens to their sinks; returns the speculation of the sequences a sink stopped
  // (a stop sequence), which it removed.
  std::vector<RequestSpeculation> deliver(const StepOutput& out);
  void fail_batch(const ScheduledBatch& batch, const std::string& message);
  void fail(std::vector<std::unique_ptr<Sequence>> sequences, const std::string& message);
  void publish_stats(int64_t num_batch_tokens);
  void shut_down(Mode mode);

  const EngineConfig config_;
  Scheduler scheduler_;  // engine thread only
  std::unique_ptr<Executor> executor_;
  const StepObserver observer_;
  int64_t total_steps_ = 0;  // engine thread only

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  std::vector<Submission> inbox_;
  Mode mode_ = Mode::kRunning;
  EngineStats stats_;

  std::mutex join_mutex_;  // stop() and drain() may race to join
  std::thread thread_;
};

}  // namespace lm
