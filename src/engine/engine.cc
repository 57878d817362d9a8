#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "base/check.h"

namespace lm {
namespace {

// Seconds since the last lap (or construction), for StepStats.
class StepTimer {
 public:
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return seconds;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

auto in(const std::vector<int64_t>& seq_ids) {
  return [&seq_ids](const Sequence& seq) {
    return std::find(seq_ids.begin(), seq_ids.end(), seq.id) != seq_ids.end();
  };
}

}  // namespace

Engine::Engine(EngineConfig config, std::unique_ptr<Executor> executor, StepObserver observer,
               std::unique_ptr<Proposer> proposer)
    : config_(config),
      scheduler_(std::move(config), std::move(proposer)),
      executor_(std::move(executor)),
      observer_(std::move(observer)) {
  LM_CHECK(executor_ != nullptr);
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() { stop(); }

Status Engine::submit(EngineRequest request, std::shared_ptr<TokenSink> sink) {
  LM_CHECK(sink != nullptr);
  // Every admitted request must fit an empty batch, or it would block the queue forever.
  LM_RETURN_IF_ERROR(check_fits_empty_batch(config_, request));
  LM_RETURN_IF_ERROR(executor_->check_request(request));
  {
    std::lock_guard lock(mutex_);
    if (mode_ != Mode::kRunning) return Error{kShuttingDownMessage};
    inbox_.push_back(Submission{std::move(request), std::move(sink)});
    ++stats_.num_waiting;
  }
  wake_.notify_one();
  return {};
}

void Engine::drain() { shut_down(Mode::kDraining); }

void Engine::stop() { shut_down(Mode::kStopping); }

void Engine::shut_down(Mode mode) {
  {
    std::lock_guard lock(mutex_);
    mode_ = std::max(mode_, mode);  // stopping overrides draining, never the reverse
  }
  wake_.notify_one();
  std::lock_guard join_lock(join_mutex_);
  if (thread_.joinable()) thread_.join();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Engine::run() {
  for (;;) {
    std::vector<Submission> arrived;
    Mode mode;
    {
      // NOTE: the thread sleeps here whenever it holds no sequence; nothing polls.
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return mode_ != Mode::kRunning || !inbox_.empty() || scheduler_.has_work();
      });
      arrived.swap(inbox_);
      mode = mode_;
    }
    for (Submission& s : arrived) scheduler_.add(std::move(s.request), std::move(s.sink));
    if (mode == Mode::kStopping) break;
    if (mode == Mode::kDraining && !scheduler_.has_work()) break;
    step();
  }
  fail(scheduler_.remove_if([](const Sequence&) { return true; }), kShuttingDownMessage);
  publish_stats(0);
}

void Engine::step() {
  ++total_steps_;
  drop_cancelled();
  StepTimer step_timer;
  ScheduledBatch batch = scheduler_.schedule();
  // Before the batch computes: a block dropped from the cache while scheduling and allocated
  // again by it is no longer listed, so no page the batch writes is handed back.
  return_blocks();
  publish_stats(batch.num_tokens());  // /metrics sees the batch while it computes
  if (batch.empty()) return;          // everything left was cancelled
  notify_admitted(batch);
  StepStats stats =
      count_step(batch, config_.kv_window_tokens);  // before update advances the sequences
  compute(batch, stats);
  return_blocks();  // what finishing sequences released, before the engine may go idle
  stats.step_seconds = step_timer.lap();
  if (!stats.failed) {
    scheduler_.cost_model().observe(stats.shape(), stats.step_seconds);
    // Speculation's payoff is judged on pure decode steps only (a prompt chunk's time says
    // nothing about it), and not on a draft's catch-up after steps without it (a transition).
    const Proposer* proposer = scheduler_.proposer();
    const bool transition = stats.num_proposed_tokens > 0 && proposer != nullptr &&
                            proposer->last_catch_up_rows() > stats.num_decode_tokens;
    if (config_.speculate > 0 && stats.num_prefill_tokens == 0 && stats.num_decode_tokens > 0 &&
        !transition) {
      int64_t num_tokens = stats.num_decode_tokens;
      for (int64_t n : stats.num_accepted) num_tokens += n;
      scheduler_.speculation_governor().observe(
          stats.num_proposed_tokens > 0, stats.num_decode_tokens, num_tokens, stats.step_seconds);
    }
  }
  // After the step, never inside it; before the stats show it done, so that a /metrics that
  // shows an idle engine holds every step's metrics.
  if (observer_) observer_(stats);
  publish_stats(batch.num_tokens());
}

void Engine::return_blocks() {
  if (std::vector<int32_t> ids = scheduler_.take_returned_blocks(); !ids.empty())
    executor_->return_blocks(ids);
}

void Engine::notify_admitted(const ScheduledBatch& batch) {
  // The admitted entries are the batch's last ones.
  for (size_t i = batch.sequences.size() - static_cast<size_t>(batch.num_admitted);
       i < batch.sequences.size(); ++i) {
    batch.sequences[i].sequence->sink->on_scheduled();
  }
}

void Engine::compute(const ScheduledBatch& batch, StepStats& stats) {
  StepTimer timer;
  Result<std::vector<SampleResult>> samples = executor_->execute(batch);
  stats.execute_seconds = timer.lap();
  stats.executor = executor_->last_timings();
  if (!samples.ok()) {
    stats.failed = true;
    fail_batch(batch, samples.error().message);
    return;
  }
  StepOutput out = scheduler_.update(batch, *samples);
  stats.num_accepted = std::move(out.num_accepted);
  stats.num_proposed = std::move(out.num_proposed);
  stats.update_seconds = timer.lap();
  std::vector<RequestSpeculation> stopped = deliver(out);
  stats.deliver_seconds = timer.lap();
  if (config_.speculate > 0) {  // finished requests, by length or EOS and by their sinks
    stats.finished_speculation = std::move(out.finished_speculation);
    stats.finished_speculation.insert(stats.finished_speculation.end(), stopped.begin(),
                                      stopped.end());
  }
}

void Engine::fail_batch(const ScheduledBatch& batch, const std::string& message) {
  std::vector<int64_t> seq_ids;
  for (const ScheduledSequence& entry : batch.sequences) seq_ids.push_back(entry.seq_id);
  fail(scheduler_.remove_if(in(seq_ids)), message);
}

void Engine::drop_cancelled() {
  // Cancelled sinks get no further call (the client is gone).
  for (const std::unique_ptr<Sequence>& seq :
       scheduler_.remove_if([](const Sequence& s) { return s.sink->cancelled(); })) {
    executor_->release(seq->id);
  }
}

std::vector<RequestSpeculation> Engine::deliver(const StepOutput& out) {
  std::vector<int64_t> stopped;
  for (const TokenOutput& token : out.tokens) {
    // A sequence may get several tokens a step (speculation): none after its sink stopped it.
    if (std::ranges::find(stopped, token.seq_id) != stopped.end()) continue;
    const bool keep_going = token.sink->on_token(token.event);
    if (!keep_going && !token.event.finish_reason) stopped.push_back(token.seq_id);
  }
  for (int64_t seq_id : out.finished_seq_ids) executor_->release(seq_id);
  std::vector<RequestSpeculation> speculation;
  if (stopped.empty()) return speculation;
  for (const std::unique_ptr<Sequence>& seq : scheduler_.remove_if(in(stopped))) {
    executor_->release(seq->id);
    speculation.push_back(seq->speculation);
  }
  return speculation;
}

void Engine::fail(std::vector<std::unique_ptr<Sequence>> sequences, const std::string& message) {
  for (const std::unique_ptr<Sequence>& seq : sequences) {
    executor_->release(seq->id);
    seq->sink->on_error(message);
  }
}

void Engine::publish_stats(int64_t num_batch_tokens) {
  std::lock_guard lock(mutex_);
  stats_.num_waiting = scheduler_.num_waiting() + static_cast<int64_t>(inbox_.size());
  stats_.num_running = scheduler_.num_running();
  stats_.num_batch_tokens = num_batch_tokens;
  stats_.num_reserved_tokens = scheduler_.num_reserved_tokens();
  stats_.total_steps = total_steps_;
  stats_.num_blocks_used = scheduler_.num_blocks_used();
  stats_.num_blocks_total = scheduler_.num_blocks_total();
  stats_.num_blocks_resident = scheduler_.num_blocks_resident();
  stats_.prefix_cache_query_tokens = scheduler_.prefix_cache_query_tokens();
  stats_.prefix_cache_hit_tokens = scheduler_.prefix_cache_hit_tokens();
  stats_.num_preemptions = scheduler_.num_preemptions();
  stats_.num_proposed_tokens = scheduler_.num_proposed_tokens();
  stats_.num_accepted_tokens = scheduler_.num_accepted_tokens();
}

}  // namespace lm
