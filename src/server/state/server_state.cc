#include "server/state/server_state.h"

namespace lm {

void register_tgi_metrics(Metrics& m, int64_t max_input_tokens, int64_t max_total_tokens) {
  m.describe("tgi_request_success", "Number of successful requests");
  m.describe("tgi_request_duration", "Request duration");
  m.describe("tgi_request_validation_duration", "Request validation duration");
  m.describe("tgi_request_queue_duration", "Request queue duration");
  m.describe("tgi_request_inference_duration", "Request inference duration");
  m.describe("tgi_request_mean_time_per_token_duration", "Mean time per token per request");
  m.describe("tgi_request_generated_tokens", "Generated tokens per request");
  m.describe("tgi_request_count", "Total number of requests");
  m.describe("tgi_batch_current_size", "Current batch size");
  m.describe("tgi_queue_size", "Current queue size");
  m.describe("tgi_batch_current_max_tokens", "Maximum tokens for the current batch");
  m.describe("tgi_request_max_new_tokens", "Maximum new tokens per request");
  m.describe("tgi_request_input_length", "Input token length per request");
  m.describe("tgi_kv_cache_blocks_used", "KV cache blocks held by running or cached sequences");
  m.describe("tgi_kv_cache_blocks_total", "KV cache blocks in the pool");
  m.describe("tgi_kv_cache_usage", "Share of KV cache blocks in use (0-1)");
  m.describe("tgi_prefix_cache_query_tokens", "Prompt tokens looked up in the prefix cache");
  m.describe("tgi_prefix_cache_hit_tokens", "Prompt tokens served from the prefix cache");
  m.describe("tgi_prefix_cache_hit_rate", "Prefix cache hit tokens / query tokens");
  m.describe("tgi_request_preemptions",
             "Sequences preempted (recomputed later) for lack of KV blocks");
  for (const char* name :
       {"tgi_request_duration", "tgi_request_validation_duration", "tgi_request_queue_duration",
        "tgi_request_inference_duration", "tgi_request_mean_time_per_token_duration"}) {
    m.set_buckets(name, Metrics::duration_buckets());
  }
  m.set_buckets("tgi_request_input_length",
                Metrics::linear_buckets(static_cast<double>(max_input_tokens)));
  m.set_buckets("tgi_request_generated_tokens",
                Metrics::linear_buckets(static_cast<double>(max_total_tokens)));
  m.set_buckets("tgi_request_max_new_tokens",
                Metrics::linear_buckets(static_cast<double>(max_total_tokens)));
}

}  // namespace lm
