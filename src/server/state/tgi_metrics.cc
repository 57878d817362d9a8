#include "server/state/tgi_metrics.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace lm {
namespace {

// TGI's HELP texts (and ours for the names TGI does not have).
constexpr std::pair<const char*, const char*> kHelp[] = {
    {"tgi_request_success", "Number of successful requests"},
    {"tgi_request_duration", "Request duration"},
    {"tgi_request_validation_duration", "Request validation duration"},
    {"tgi_request_queue_duration", "Request queue duration"},
    {"tgi_request_inference_duration", "Request inference duration"},
    {"tgi_request_mean_time_per_token_duration", "Mean time per token per request"},
    {"tgi_request_generated_tokens", "Generated tokens per request"},
    {"tgi_batch_inference_count", "Inference calls per method (prefill or decode)"},
    {"tgi_request_count", "Total number of requests"},
    {"tgi_batch_inference_success",
     "Number of successful inference calls per method (prefill or decode)"},
    {"tgi_batch_current_size", "Current batch size"},
    {"tgi_queue_size", "Current queue size"},
    {"tgi_batch_current_max_tokens", "Maximum tokens for the current batch"},
    {"tgi_request_max_new_tokens", "Maximum new tokens per request"},
    {"tgi_batch_inference_duration", "Batch inference duration"},
    {"tgi_batch_forward_duration", "Batch forward duration per method (prefill or decode)"},
    {"tgi_request_skipped_tokens", "Speculated tokens per request"},
    {"tgi_batch_filter_duration",
     "Time spent filtering batches and sending generated tokens per method (prefill or "
     "decode)"},
    {"tgi_batch_decode_duration", "Time spent decoding a batch per method (prefill or decode)"},
    {"tgi_request_input_length", "Input token length per request"},
    {"tgi_batch_next_size", "Batch size of the next batch"},
    // Ours (no TGI equivalent; named in TGI's style).
    {"tgi_kv_cache_blocks_used", "KV cache blocks held by running or cached sequences"},
    {"tgi_kv_cache_blocks_total", "KV cache blocks in the pool"},
    {"tgi_kv_cache_usage", "Share of KV cache blocks in use (0-1)"},
    {"tgi_prefix_cache_query_tokens", "Prompt tokens looked up in the prefix cache"},
    {"tgi_prefix_cache_hit_tokens", "Prompt tokens served from the prefix cache"},
    {"tgi_prefix_cache_hit_rate", "Prefix cache hit tokens / query tokens"},
    {"tgi_request_preemptions", "Sequences preempted (recomputed later) for lack of KV blocks"},
    {"tgi_speculative_proposed_tokens",
     "Tokens proposed by n-gram speculation and verified (--speculate)"},
    {"tgi_speculative_accepted_tokens",
     "Proposed tokens the model's own choice accepted (generated without a forward of their own)"},
    {"lm_speculative_acceptance_rate",
     "Proposed tokens accepted / proposed tokens verified, since start (--speculate)"},
    {"lm_request_speculative_proposed_tokens",
     "Tokens proposed and verified per finished request (--speculate)"},
    {"lm_request_speculative_accepted_tokens",
     "Proposed tokens accepted per finished request (--speculate)"},
    {"tgi_kv_cache_blocks_resident",
     "KV cache blocks written and not handed back to the OS (in use, cached or recently freed)"},
    {"lm_kv_cache_resident_bytes", "Bytes of the KV cache's resident blocks"},
    {"lm_step_duration_seconds",
     "Engine step duration, scheduling to delivery, by what the step computed (prefill: only "
     "prompt chunks, decode: only new tokens, mixed: both)"},
    {"lm_request_inter_token_latency_seconds", "Time between consecutive tokens of a request"},
    {"lm_grammar_compile_duration_seconds",
     "Time to get a request's compiled grammar, by whether it came from the cache"},
    // The Gateway API Inference Extension's defaults (vLLM's names and help texts).
    {"vllm:num_requests_waiting", "Number of requests waiting to be processed."},
    {"vllm:num_requests_running", "Number of requests in model execution batches."},
    {"vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."},
    {"vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage."},
    // vLLM's speculative-decoding counters, with the _total its Prometheus client appends:
    // tools that read acceptance from a vLLM server's /metrics (AIPerf, vLLM's own PromQL
    // recipes) read ours.
    {"vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts."},
    {"vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens."},
    {"vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens."},
    {"vllm:spec_decode_num_accepted_tokens_per_pos_total", "Accepted tokens per draft position."},
};

}  // namespace

void register_tgi_metrics(Metrics& m, int64_t max_input_tokens, int64_t max_total_tokens) {
  for (const auto& [name, help] : kHelp) m.describe(name, help);

  // TGI configures buckets for every name ending in "duration".
  for (const char* name :
       {"tgi_request_duration", "tgi_request_validation_duration", "tgi_request_queue_duration",
        "tgi_request_inference_duration", "tgi_request_mean_time_per_token_duration",
        "tgi_batch_inference_duration", "tgi_batch_forward_duration", "tgi_batch_decode_duration",
        "tgi_batch_filter_duration", "tgi_batch_concat_duration", "lm_step_duration_seconds",
        "lm_request_inter_token_latency_seconds", "lm_grammar_compile_duration_seconds"}) {
    m.set_buckets(name, Metrics::duration_buckets());
  }
  m.set_buckets("tgi_request_input_length",
                Metrics::linear_buckets(static_cast<double>(max_input_tokens)));
  m.set_buckets("tgi_request_generated_tokens",
                Metrics::linear_buckets(static_cast<double>(max_total_tokens)));
  m.set_buckets("tgi_request_max_new_tokens",
                Metrics::linear_buckets(static_cast<double>(max_total_tokens)));
  m.set_buckets("tgi_batch_next_size", Metrics::linear_buckets(1024, 1024));  // 1, 2, ..., 1024
  for (const char* name :
       {"lm_request_speculative_proposed_tokens", "lm_request_speculative_accepted_tokens"}) {
    m.set_buckets(name, Metrics::linear_buckets(static_cast<double>(max_total_tokens)));
  }
  // Its bucket configuration is commented out in TGI, so its exporter renders a summary.
  m.set_summary("tgi_request_skipped_tokens");
}

void label_vllm_metrics(Metrics& m, const std::string& model_name) {
  m.set_prefix_labels("vllm:", Metrics::label_pair("model_name", model_name));
}

const char* tgi_step_method(const StepStats& stats) {
  return stats.num_admitted > 0 ? "prefill" : "decode";
}

void record_step(Metrics& m, const StepStats& s) {
  const std::string method = std::string("method=\"") + tgi_step_method(s) + "\"";
  // TGI's next_batch: a new batch left the queue; with running requests beside it, it was merged
  // into the running batch (always reason "chunking": our prefill is chunked).
  const bool concat = s.num_admitted > 0 && s.num_admitted < s.num_sequences;
  if (s.num_admitted > 0) m.observe("tgi_batch_next_size", static_cast<double>(s.num_admitted));
  if (concat) m.increment("tgi_batch_concat", "reason=\"chunking\"");
  m.increment("tgi_batch_inference_count", method);
  if (s.failed) {
    m.increment("tgi_batch_inference_failure", method);
    return;
  }
  // The shard's forward time; its decode time (logits to tokens, stopping criteria); the router's
  // time to send tokens and drop finished requests; and the whole call.
  m.observe("tgi_batch_forward_duration", s.executor.forward_seconds, method);
  m.observe("tgi_batch_decode_duration", s.executor.sample_seconds + s.update_seconds, method);
  m.observe("tgi_batch_filter_duration", s.deliver_seconds, method);
  m.observe("tgi_batch_inference_duration",
            s.execute_seconds + s.update_seconds + s.deliver_seconds, method);
  // NOTE: we never concatenate batches; what takes its place is building the step's flat inputs
  // with the admitted sequences in them. TGI labels it "decode" even on its prefill path.
  if (concat) {
    m.observe("tgi_batch_concat_duration", s.executor.prepare_seconds, "method=\"decode\"");
  }
  m.increment("tgi_batch_inference_success", method);
  m.observe("lm_step_duration_seconds", s.step_seconds, std::string("kind=\"") + s.kind() + "\"");
  // Per sampled sequence, the tokens it got beyond one (accepted proposals); 0 without them.
  const int64_t num_plain =
      s.num_samples - std::ranges::count_if(s.num_accepted, [](int64_t n) { return n > 0; });
  if (num_plain > 0)
    m.observe("tgi_request_skipped_tokens", 0, "", static_cast<uint64_t>(num_plain));
  for (int64_t n : s.num_accepted) {
    if (n > 0) m.observe("tgi_request_skipped_tokens", static_cast<double>(n));
  }
  // vLLM's counters: a draft is a sampling entry's proposals of one step; position i counts the
  // drafts whose first i + 1 proposals were accepted (summed over the step's drafts first, so a
  // label is made once per position a step, not once per accepted token).
  std::vector<int64_t> accepted_at;
  for (size_t i = 0; i < s.num_proposed.size() && i < s.num_accepted.size(); ++i) {
    if (s.num_proposed[i] == 0) continue;
    m.increment("vllm:spec_decode_num_drafts_total");
    m.increment("vllm:spec_decode_num_draft_tokens_total", "",
                static_cast<double>(s.num_proposed[i]));
    m.increment("vllm:spec_decode_num_accepted_tokens_total", "",
                static_cast<double>(s.num_accepted[i]));
    const auto accepted = static_cast<size_t>(std::min(s.num_accepted[i], s.num_proposed[i]));
    if (accepted_at.size() < accepted) accepted_at.resize(accepted);
    for (size_t p = 0; p < accepted; ++p) ++accepted_at[p];
  }
  for (size_t p = 0; p < accepted_at.size(); ++p) {
    m.increment("vllm:spec_decode_num_accepted_tokens_per_pos_total",
                "position=\"" + std::to_string(p) + "\"", static_cast<double>(accepted_at[p]));
  }
  for (const RequestSpeculation& r : s.finished_speculation) {
    m.observe("lm_request_speculative_proposed_tokens", static_cast<double>(r.num_proposed));
    m.observe("lm_request_speculative_accepted_tokens", static_cast<double>(r.num_accepted));
  }
}

void InterTokenTimer::on_token(Metrics& metrics) {
  const auto now = std::chrono::steady_clock::now();
  if (last_) {
    metrics.observe("lm_request_inter_token_latency_seconds",
                    std::chrono::duration<double>(now - *last_).count());
  }
  last_ = now;
}

void publish_engine_stats(Metrics& m, const EngineStats& stats, int64_t kv_bytes_per_block) {
  const auto waiting = static_cast<double>(stats.num_waiting);
  const auto running = static_cast<double>(stats.num_running);
  const double kv_usage =
      stats.num_blocks_total > 0
          ? static_cast<double>(stats.num_blocks_used) / static_cast<double>(stats.num_blocks_total)
          : 0.0;
  m.set_gauge("tgi_queue_size", waiting);
  m.set_gauge("tgi_batch_current_size", running);
  m.set_gauge("tgi_batch_current_max_tokens", static_cast<double>(stats.num_reserved_tokens));
  m.set_gauge("tgi_kv_cache_blocks_used", static_cast<double>(stats.num_blocks_used));
  m.set_gauge("tgi_kv_cache_blocks_total", static_cast<double>(stats.num_blocks_total));
  m.set_gauge("tgi_kv_cache_usage", kv_usage);
  m.set_gauge("tgi_kv_cache_blocks_resident", static_cast<double>(stats.num_blocks_resident));
  m.set_gauge("lm_kv_cache_resident_bytes", static_cast<double>(stats.num_blocks_resident) *
                                                static_cast<double>(kv_bytes_per_block));
  m.set_counter("tgi_prefix_cache_query_tokens",
                static_cast<double>(stats.prefix_cache_query_tokens));
  m.set_counter("tgi_prefix_cache_hit_tokens", static_cast<double>(stats.prefix_cache_hit_tokens));
  m.set_gauge("tgi_prefix_cache_hit_rate",
              stats.prefix_cache_query_tokens > 0
                  ? static_cast<double>(stats.prefix_cache_hit_tokens) /
                        static_cast<double>(stats.prefix_cache_query_tokens)
                  : 0.0);
  m.set_counter("tgi_request_preemptions", static_cast<double>(stats.num_preemptions));
  m.set_counter("tgi_speculative_proposed_tokens", static_cast<double>(stats.num_proposed_tokens));
  m.set_counter("tgi_speculative_accepted_tokens", static_cast<double>(stats.num_accepted_tokens));
  if (stats.num_proposed_tokens > 0) {
    m.set_gauge("lm_speculative_acceptance_rate",
                static_cast<double>(stats.num_accepted_tokens) /
                    static_cast<double>(stats.num_proposed_tokens));
  }
  m.set_gauge("vllm:num_requests_waiting", waiting);
  m.set_gauge("vllm:num_requests_running", running);
  m.set_gauge("vllm:kv_cache_usage_perc", kv_usage);
  m.set_gauge("vllm:gpu_cache_usage_perc", kv_usage);
}

}  // namespace lm
