#include "bench/engine_benchmark.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "bench/machine_limits.h"
#include "bench/paired_roofline.h"
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
    RunClock clock;
    PairedRoofline roofline;
    StepObserver observer;
    if (r >= warmups && c.read_probe != nullptr && c.decode_read_bytes > 0) {
      // Passes start once every request has its first token, so none falls in the prefill
      // phase; steps that computed prompt tokens are not decode steps.
      observer = [&roofline, &clock, &c](const StepStats& stats) {
        if (stats.failed || stats.num_prefill_tokens > 0 || stats.num_decode_tokens == 0) return;
        {
          std::lock_guard<std::mutex> lock(clock.mutex);
          if (clock.first_tokens < c.batch_size) return;
        }
        const auto start = Clock::now();
        const double bandwidth = c.read_probe->measure();
        roofline.passes.push_back(
            {start, Clock::now(), bandwidth,
             static_cast<double>(c.decode_read_bytes) / stats.step_seconds / bandwidth});
      };
    }
    Engine engine(config, std::make_unique<ModelExecutor>(model, pool, config, c.kv_dtype),
                  std::move(observer));
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
    for (const PairedRoofline::Pass& pass : roofline.after(clock.last_first_token)) {
      run.decode_roofline_fractions.push_back(pass.fraction);
      run.read_pass_bytes_per_second.push_back(pass.bytes_per_second);
    }
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
