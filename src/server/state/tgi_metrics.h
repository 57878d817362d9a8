// TGI's metric set (spec §3.2) on our Metrics registry: descriptions and buckets registered once at
// start, the tgi_batch_* family recorded from the engine's StepStats after each step, and the
// gauges read from EngineStats when /metrics is scraped (TGI's, ours, the Gateway API's).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "engine/step_stats.h"
#include "server/metrics/metrics.h"

namespace lm {

// Registers TGI's metric descriptions, histogram buckets and summaries.
void register_tgi_metrics(Metrics& metrics, int64_t max_input_tokens, int64_t max_total_tokens);
// Gives the vllm: families vLLM's model_name label (vLLM: the served model name; ours: the model
// id, as /v1/models answers it): vLLM's dashboards and PromQL recipes select on it.
void label_vllm_metrics(Metrics& metrics, const std::string& model_name);

// TGI's `method` label for a step. NOTE: our steps mix prompt chunks and decodes; TGI v3 with
// chunked prefill (spec §5.2) labels the forward that takes a new batch from the queue "prefill"
// (it also computes a token for every running request) and every other forward "decode" (later
// chunks of a long prompt included). So: "prefill" iff the step admitted a sequence.
const char* tgi_step_method(const StepStats& stats);

// The tgi_batch_* family (and tgi_request_skipped_tokens) for one engine step, and our
// lm_step_duration_seconds{kind="prefill"|"decode"|"mixed"}; a StepObserver.
void record_step(Metrics& metrics, const StepStats& stats);

// A request's time between consecutive tokens, observed into our
// lm_request_inter_token_latency_seconds (TGI has only the mean per request). One per generated
// sequence; its sink calls on_token for every token.
class InterTokenTimer {
 public:
  void on_token(Metrics& metrics);

 private:
  std::optional<std::chrono::steady_clock::time_point> last_;
};

// Gauges and counters the engine keeps: TGI's queue and batch gauges, our KV and prefix cache
// figures, and the gauges the Gateway API Inference Extension's endpoint picker reads by default
// (vLLM's names: vllm:num_requests_waiting, vllm:num_requests_running, vllm:kv_cache_usage_perc
// and its former vllm:gpu_cache_usage_perc).
// kv_bytes_per_block turns the resident block count into lm_kv_cache_resident_bytes.
void publish_engine_stats(Metrics& metrics, const EngineStats& stats,
                          int64_t kv_bytes_per_block = 0);

}  // namespace lm
