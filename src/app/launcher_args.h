// The launcher's settings: TGI's flags (each with its environment twin, bound in app/), their
// defaults, the values derived from the model when unset, and TGI's cross-checks and messages.
// Flags that would change results and are not built are refused here; harmless ones are
// accepted with a note saying what they do here (README's flag table lists each).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/model_config.h"
#include "tensor/dtype.h"

namespace lm {

struct LauncherArgs {
  std::string model_id = "bigscience/bloom-560m";
  std::optional<std::string> revision;
  std::optional<std::string> gguf_file;  // --gguf-file: which GGUF file of a Hub repository
  int64_t validation_workers = 2;
  std::optional<std::string> sharded;  // "true"/"false"
  std::optional<int64_t> num_shard;
  std::optional<std::string> quantize;
  std::optional<int64_t> speculate;
  // Ours (vLLM's --speculative-model, llama.cpp's --model-draft): a model with the same
  // tokenizer whose greedy continuations are the proposals (app/draft_model.h).
  std::optional<std::string> speculative_model_id;
  // Ours: speculation only in the steps where it is measured to pay (EngineConfig's
  // adaptive_speculation); false: every decode step proposes.
  bool adaptive_speculation = true;  // env ADAPTIVE_SPECULATION
  std::optional<std::string> dtype;
  std::optional<std::string> kv_cache_dtype;
  bool trust_remote_code = false;
  int64_t max_concurrent_requests = 128;
  int64_t max_best_of = 2;
  int64_t max_stop_sequences = 4;
  int64_t max_top_n_tokens = 5;
  std::optional<int64_t> max_input_tokens;
  std::optional<int64_t> max_input_length;
  std::optional<int64_t> max_total_tokens;
  double waiting_served_ratio = 0.3;
  std::optional<int64_t> max_batch_prefill_tokens;
  std::optional<int64_t> max_batch_total_tokens;
  int64_t max_waiting_tokens = 20;
  std::optional<int64_t> max_batch_size;
  std::optional<std::string> cuda_graphs;
  std::string hostname = "0.0.0.0";
  int64_t port = 3000;
  int64_t prometheus_port = 9000;
  std::string shard_uds_path = "/tmp/text-generation-server";
  std::string master_addr = "localhost";
  int64_t master_port = 29500;
  std::optional<std::string> huggingface_hub_cache;
  std::optional<std::string> weights_cache_override;
  bool disable_custom_kernels = false;
  double cuda_memory_fraction = 1.0;
  std::optional<std::string> rope_scaling;
  std::optional<double> rope_factor;
  bool json_output = false;
  std::optional<std::string> otlp_endpoint;
  std::string otlp_service_name = "text-generation-inference.router";
  std::vector<std::string> cors_allow_origin;
  std::optional<std::string> api_key;
  std::optional<double> watermark_gamma;
  std::optional<double> watermark_delta;
  bool ngrok = false;
  std::optional<std::string> ngrok_authtoken;
  std::optional<std::string> ngrok_edge;
  std::optional<std::string> tokenizer_config_path;
  bool disable_grammar_support = false;
  int64_t max_client_batch_size = 4;
  std::optional<std::string> lora_adapters;
  std::string usage_stats = "on";
  int64_t payload_limit = 2000000;
  bool enable_prefill_logprobs = false;
  int64_t graceful_termination_timeout = 90;
  bool env = false;  // print the runtime environment and exit
  // Ours (no TGI twin): compute threads and the share of available RAM the KV cache may use
  // when max_batch_total_tokens is inferred.
  int64_t num_threads = 0;
  double kv_cache_memory_fraction = 0.5;
  std::string device = "cpu";
  bool prefix_caching = true;  // env PREFIX_CACHING, as TGI's launcher passes it
  // The most MiB of cached prefix blocks kept resident with no request using them (env
  // PREFIX_CACHE_MAX_MIB); past it the least recently used are dropped and their memory handed
  // back. Unset: a quarter of the KV cache; -1: no limit (the whole pool may fill).
  std::optional<int64_t> prefix_cache_max_mib;
  int64_t kv_block_size = 16;
  // The inter-token latency target of a step while sequences decode (env MAX_STEP_LATENCY_MS):
  // long prompts are prefilled in chunks that keep each step within it. 0: one chunk per step
  // up to max_batch_prefill_tokens, TGI's behaviour. 300: on the default model at 2 threads the
  // longest gap stays under 0.5 s while a 4000-token prompt's TTFT stays within 1.2x of one
  // whole-budget step (200 cost it 1.3x: each step carries a fixed cost;
  // bench/results/issue26_mixed_load.json).
  int64_t max_step_latency_ms = 300;
  // Int8-quantized activations for GGML block-format weights, as llama.cpp computes them: integer
  // dots (VNNI where present) are ~1.8x faster than fp32-activation dots for one stream and at
  // least as fast for batches (multi-row kernel); top-1 agreement with llama.cpp 97.0% vs 96.6%.
  bool int8_activations = true;  // env INT8_ACTIVATIONS
  // Resolve everything a start would, print the memory plan and exit (env DRY_RUN).
  bool dry_run = false;
  // The highest CPU kernel level (app/cpu_isa_flag.h; env CPU_ISA): auto or a kernels::Isa name.
  std::string cpu_isa = "auto";
  // Slow and stalled clients (app/http_config.h): seconds each wait on a client may take (0: no
  // limit; nginx's defaults), response bytes queued per connection, and the open-connection cap
  // (unset: derived from the file descriptor limit; 0: no cap).
  double http_header_timeout_secs = 60;
  double http_body_timeout_secs = 60;
  double http_keepalive_timeout_secs = 75;
  double http_send_timeout_secs = 60;
  int64_t http_max_send_buffer_bytes = int64_t{4} << 20;
  int64_t http_socket_send_buffer_bytes = 0;  // SO_SNDBUF; 0: the kernel's autotuning
  std::optional<int64_t> max_connections;
};

// What the model contributes to the derived defaults.
struct ModelLimits {
  int64_t max_position_embeddings = 0;
  int64_t kv_bytes_per_token = 0;          // all layers, keys and values
  int64_t weights_bytes = 0;               // as held in memory (after --dtype)
  int64_t activation_bytes_per_token = 0;  // the forward's workspace per batch token
};

// The settings the server runs with, every limit resolved.
struct ServeSettings {
  int64_t max_input_tokens = 0;
  int64_t max_total_tokens = 0;
  int64_t max_batch_prefill_tokens = 0;
  int64_t max_batch_total_tokens = 0;
  std::optional<int64_t> max_batch_size;
  bool max_batch_total_tokens_inferred = false;
  // How an inferred max_batch_total_tokens was sized (0 when it was given).
  int64_t margin_bytes = 0;     // kept free for the workspace and the process itself
  int64_t kv_budget_bytes = 0;  // (available - weights - margin) * kv_cache_memory_fraction
};

// Refuses flags that would change results and are not built, and checks the rules that need no
// model (TGI's launcher checks). Returns notes to log (as warnings) for accepted flags that have
// no effect here.
Result<std::vector<std::string>> check_launcher_args(const LauncherArgs& args);

// --dtype: float16 / bfloat16 / float32 as the dtype float weights are held in (none: stored).
Result<std::optional<DType>> launcher_dtype(const LauncherArgs& args);
// --rope-scaling / --rope-factor as TGI reads them: the factor defaults to 1.0, a factor alone
// means linear.
Result<std::optional<RopeScalingOverride>> launcher_rope_scaling(const LauncherArgs& args);

// Memory kept free besides the weights and the KV cache: the process, the HTTP server, threads.
inline constexpr int64_t kFixedMarginBytes = int64_t{128} << 20;

// Derives unset limits from the model and available memory, then applies TGI's router checks.
// `available_memory_bytes` is what the process may use before the weights are loaded (the
// smaller of MemAvailable and the cgroup's headroom, app/memory_limits.h); the KV cache gets
// kv_cache_memory_fraction of what is left after the weights and a margin.
Result<ServeSettings> derive_serve_settings(const LauncherArgs& args, const ModelLimits& model,
                                            uint64_t available_memory_bytes);

}  // namespace lm
