#include "bench/engine_benchmark.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "engine/engine.h"
#include "model/weight_dtype.h"
#include "runtime/model_executor.h"

namespace lm {
namespace {

using Clock = std::chrono::steady_clock;

// Shared by the sinks of one run: when each request got its first and last token.
struct RunClock {
  std::mutex mutex;
  std::condition_variable all_done;
  int64_t first_tokens = 0;
  int64_t finished = 0;
  Clock::time_point last_first_token;
  Clock::time_point last_token;
  std::string error;
};

// The paired roofline's record of one run (engine thread only): each pure decode step's
// fraction of the bandwidth a read pass measured right after it, and when the passes ran.
struct PairedRoofline {
  struct Pass {
    Clock::time_point start, end;
    double fraction;
  };
  std::vector<Pass> passes;

  // The fractions of the steps after `from` (the first token's step: decode's steps), and the
  // seconds the passes took from an interval (the last step's pass runs after its token).
  std::vector<double> fractions_after(Clock::time_point from) const {
    std::vector<double> out;
    for (const Pass& p : passes)
      if (p.start >= from) out.push_back(p.fraction);
    return out;
  }
  double seconds_within(Clock::time_point from, Clock::time_point to) const {
    double total = 0;
    for (const Pass& p : passes)
      if (p.start >= from && p.end <= to)
        total += std::chrono::duration<double>(p.end - p.start).count();
    return total;
  }
};

class TimingSink final : public TokenSink {
 public:
  explicit TimingSink(RunClock& clock) : clock_(clock) {}
  bool on_token(const TokenEvent& event) override {
    const auto now = Clock::now();
    std::lock_guard<std::mutex> lock(clock_.mutex);
    if (!seen_first_) {
      seen_first_ = true;
      ++clock_.first_tokens;
      clock_.last_first_token = now;
    }
    if (event.finish_reason) {
      ++clock_.finished;
      clock_.last_token = now;
      clock_.all_done.notify_all();
    }
    return true;
  }
  void on_error(const std::string& message) override {
    std::lock_guard<std::mutex> lock(clock_.mutex);
    clock_.error = message;
    ++clock_.finished;
    clock_.all_done.notify_all();
  }
  bool cancelled() const override { return false; }

 private:
  RunClock& clock_;
  bool seen_first_ = false;  // engine thread only
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

int64_t decode_read_bytes(const LlamaWeights& weights) {
  int64_t bytes = summarize_weights(weights).bytes;
  if (weights.lm_head.data != weights.embed_tokens.data)
    bytes -= weights.embed_tokens.dim(0) * weights.embed_tokens.row_bytes();
  return bytes;
}

Result<std::vector<BenchmarkRun>> run_engine_benchmark(LlamaModel& model, ThreadPool& pool,
                                                       const BenchmarkCase& c, int runs,
                                                       int warmups) {
  if (c.batch_size < 1 || c.sequence_length < 1 || c.decode_length < 1)
    return Error{"batch size, sequence length and decode length must be at least 1"};
  const int64_t per_request = c.sequence_length + c.decode_length;
  if (per_request > model.config().max_context()) {
    return Error{"sequence length + decode length (" + std::to_string(per_request) +
                 ") exceeds the model's context (" + std::to_string(model.config().max_context()) +
                 ")"};
  }
  EngineConfig config;
  config.max_batch_size = c.batch_size;
  config.max_batch_prefill_tokens = std::max<int64_t>(c.batch_size * c.sequence_length, 1);
  config.max_batch_total_tokens = c.batch_size * per_request;
  config.num_blocks =
      c.batch_size * ((per_request + config.block_size - 1) / config.block_size) + 1;
  config.prefix_caching = false;

  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(model.config().vocab_size - 1));
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(c.batch_size));
  for (auto& p : prompts) {
    p.resize(static_cast<size_t>(c.sequence_length));
    for (int32_t& t : p) t = id(rng);
  }

  // A warm-up run prefills and decodes one step: that faults the mmapped weights in and sizes
  // the workspaces; repeating the whole decode would only cost time (minutes on a 7B model).
  BenchmarkCase warmup = c;
  warmup.decode_length = std::min<int64_t>(c.decode_length, 2);
  std::vector<BenchmarkRun> results;
  for (int r = 0; r < warmups + runs; ++r) {
    const BenchmarkCase& run_case = r < warmups ? warmup : c;
    PairedRoofline roofline;
    StepObserver observer;
    if (r >= warmups && c.read_probe != nullptr && c.decode_read_bytes > 0) {
      observer = [&roofline, &c](const StepStats& stats) {
        if (stats.failed || stats.num_prefill_tokens > 0 || stats.num_decode_tokens == 0) return;
        const auto start = Clock::now();
        const double bandwidth = c.read_probe->bytes_per_second();
        roofline.passes.push_back(
            {start, Clock::now(),
             static_cast<double>(c.decode_read_bytes) / stats.step_seconds / bandwidth});
      };
    }
    Engine engine(config, std::make_unique<ModelExecutor>(model, pool, config, c.kv_dtype),
                  std::move(observer));
    RunClock clock;
    const auto start = Clock::now();
    for (const auto& prompt : prompts) {
      EngineRequest request;
      request.prompt_ids = prompt;
      request.max_new_tokens = run_case.decode_length;
      request.ignore_eos = true;
      request.use_prefix_cache = false;
      LM_RETURN_IF_ERROR(engine.submit(std::move(request), std::make_shared<TimingSink>(clock)));
    }
    {
      std::unique_lock<std::mutex> lock(clock.mutex);
      clock.all_done.wait(lock, [&] { return clock.finished == run_case.batch_size; });
      if (!clock.error.empty()) return Error{"benchmark request failed: " + clock.error};
    }
    engine.drain();
    if (r < warmups) continue;
    BenchmarkRun run;
    run.prefill_seconds = seconds(clock.last_first_token - start);
    run.read_probe_seconds = roofline.seconds_within(clock.last_first_token, clock.last_token);
    run.decode_seconds =
        seconds(clock.last_token - clock.last_first_token) - run.read_probe_seconds;
    run.decode_roofline_fractions = roofline.fractions_after(clock.last_first_token);
    run.prefill_tokens_per_second =
        static_cast<double>(c.batch_size * c.sequence_length) / run.prefill_seconds;
    if (c.decode_length > 1 && run.decode_seconds > 0) {
      run.decode_step_seconds = run.decode_seconds / static_cast<double>(c.decode_length - 1);
      run.decode_tokens_per_second =
          static_cast<double>(c.batch_size * (c.decode_length - 1)) / run.decode_seconds;
    }
    results.push_back(run);
  }
  return results;
}

}  // namespace lm
