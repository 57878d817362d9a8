#include "app/launcher_flags.h"

#include <CLI/CLI.hpp>

#include "app/cpu_isa_flag.h"

#if defined(LM_WITH_CUDA)
#include "kernels/cuda/device_info.h"
#endif

namespace lm {

void add_launcher_flags(CLI::App& app, LauncherArgs& a) {
  app.add_option("--model-id", a.model_id,
                 "A Hub repository id (org/name; org/name:QUANT picks a GGUF repository's file "
                 "as llama.cpp's -hf), a local model folder (config.json + safetensors) or a "
                 "GGUF file")
      ->envname("MODEL_ID")
      ->capture_default_str();
  app.add_option("--revision", a.revision,
                 "Hub revision: branch, tag, commit or refs/pr/N (default main)")
      ->envname("REVISION");
  app.add_option("--gguf-file", a.gguf_file,
                 "The file of a Hub repository of GGUF files to serve (the first shard of a split "
                 "model); overrides a :QUANT in --model-id")
      ->envname("GGUF_FILE");
  app.add_option("--validation-workers", a.validation_workers,
                 "Threads that validate, template, tokenize and compile grammars")
      ->envname("VALIDATION_WORKERS")
      ->capture_default_str();
  app.add_option("--sharded", a.sharded,
                 "Tensor-parallel sharding: true/false (refused when true: issue 25)")
      ->envname("SHARDED");
  app.add_option("--num-shard", a.num_shard, "Tensor-parallel degree (only 1 here: issue 25)")
      ->envname("NUM_SHARD");
  app.add_option(
         "--quantize", a.quantize,
         "The checkpoint's quantization: gptq, awq, compressed-tensors, fp8, marlin (read "
         "from config.json when unset); or fp8 (E4M3, one scale a tensor, as TGI), "
         "bitsandbytes (LLM.int8), bitsandbytes-nf4, "
         "bitsandbytes-fp4, eetq, q8_0, q4_0, q4_1, "
         "q5_0, q5_1, q4_k, q5_k, q6_k: a float checkpoint's Linear weights quantized at load "
         "to that format")
      ->envname("QUANTIZE");
  app.add_option("--speculate", a.speculate,
                 "Tokens proposed per decode step (by n-gram prompt lookup, or by "
                 "--speculative-model-id) and verified in the same forward (outputs unchanged; 0: "
                 "off; unset: off, or 4 with a draft model)")
      ->envname("SPECULATE");
  app.add_option("--speculative-model-id", a.speculative_model_id,
                 "A draft model with the same tokenizer (local GGUF file or folder, or Hub "
                 "repository) that proposes the tokens --speculate verifies, e.g. a low-bit copy "
                 "or a small sibling of the model")
      ->envname("SPECULATIVE_MODEL_ID");
  app.add_option("--adaptive-speculation", a.adaptive_speculation,
                 "Propose only in the steps where speculation is measured to pay: decode steps "
                 "with and without proposals are timed per batch size and the faster kind runs "
                 "(true/false; false: every decode step proposes)")
      ->envname("ADAPTIVE_SPECULATION")
      ->capture_default_str();
  app.add_option("--dtype", a.dtype,
                 "float16/bfloat16/float32: the dtype float weights are held in (converted at "
                 "load; quantized GGUF matrices keep their format; compute is fp32)")
      ->envname("DTYPE");
  app.add_option("--kv-cache-dtype", a.kv_cache_dtype,
                 "KV cache element type: fp8_e4m3fn, fp8_e5m2 (fp8: e4m3fn), fp16, bf16, fp32 "
                 "(default: fp16 for block-quantized weights with int8 activations, else fp32)")
      ->envname("KV_CACHE_DTYPE");
  app.add_flag("--trust-remote-code", a.trust_remote_code, "Accepted; no remote code is ever run")
      ->envname("TRUST_REMOTE_CODE");
  app.add_option("--max-concurrent-requests", a.max_concurrent_requests,
                 "In-flight requests before 429")
      ->envname("MAX_CONCURRENT_REQUESTS")
      ->capture_default_str();
  app.add_option("--max-best-of", a.max_best_of, "Largest best_of accepted")
      ->envname("MAX_BEST_OF")
      ->capture_default_str();
  app.add_option("--max-stop-sequences", a.max_stop_sequences, "Most stop sequences per request")
      ->envname("MAX_STOP_SEQUENCES")
      ->capture_default_str();
  app.add_option("--max-top-n-tokens", a.max_top_n_tokens, "Largest top_n_tokens accepted")
      ->envname("MAX_TOP_N_TOKENS")
      ->capture_default_str();
  app.add_option("--max-input-tokens", a.max_input_tokens,
                 "Longest prompt in tokens (default: max_total_tokens - 1)")
      ->envname("MAX_INPUT_TOKENS");
  app.add_option("--max-input-length", a.max_input_length, "Deprecated name of --max-input-tokens")
      ->envname("MAX_INPUT_LENGTH");
  app.add_option(
         "--max-total-tokens", a.max_total_tokens,
         "Longest prompt + generation (default: the model's context, bounded by the KV budget)")
      ->envname("MAX_TOTAL_TOKENS");
  app.add_option("--waiting-served-ratio", a.waiting_served_ratio,
                 "TGI batching knob (no effect: continuous batching)")
      ->envname("WAITING_SERVED_RATIO")
      ->capture_default_str();
  app.add_option("--max-batch-prefill-tokens", a.max_batch_prefill_tokens,
                 "Prompt tokens per step (default: min(4096, context))")
      ->envname("MAX_BATCH_PREFILL_TOKENS");
  app.add_option("--max-batch-total-tokens", a.max_batch_total_tokens,
                 "KV budget in tokens (default: inferred from available memory)")
      ->envname("MAX_BATCH_TOTAL_TOKENS");
  app.add_option("--max-waiting-tokens", a.max_waiting_tokens,
                 "TGI batching knob (no effect: continuous batching)")
      ->envname("MAX_WAITING_TOKENS")
      ->capture_default_str();
  app.add_option("--max-batch-size", a.max_batch_size, "Most sequences per step")
      ->envname("MAX_BATCH_SIZE");
  app.add_option("--cuda-graphs", a.cuda_graphs,
                 "CUDA graph batch sizes (accepted; no effect on the CPU)")
      ->envname("CUDA_GRAPHS");
  app.add_option("--hostname", a.hostname, "Address to bind")
      ->envname("HOSTNAME")
      ->capture_default_str();
  app.add_option("-p,--port", a.port, "Port to serve on")->envname("PORT")->capture_default_str();
  app.add_option("--prometheus-port", a.prometheus_port,
                 "Accepted; metrics are served on --port at /metrics")
      ->envname("PROMETHEUS_PORT")
      ->capture_default_str();
  app.add_option("--shard-uds-path", a.shard_uds_path, "Accepted; there are no shard processes")
      ->envname("SHARD_UDS_PATH")
      ->capture_default_str();
  app.add_option("--master-addr", a.master_addr, "Accepted; there are no shard processes")
      ->envname("MASTER_ADDR")
      ->capture_default_str();
  app.add_option("--master-port", a.master_port, "Accepted; there are no shard processes")
      ->envname("MASTER_PORT")
      ->capture_default_str();
  app.add_option("--huggingface-hub-cache", a.huggingface_hub_cache,
                 "Hub cache folder (default $HF_HOME/hub)")
      ->envname("HUGGINGFACE_HUB_CACHE");
  app.add_option("--weights-cache-override", a.weights_cache_override,
                 "A folder holding the model files, used instead of the Hub cache")
      ->envname("WEIGHTS_CACHE_OVERRIDE");
  app.add_flag("--disable-custom-kernels", a.disable_custom_kernels,
               "Accepted; no effect on the CPU")
      ->envname("DISABLE_CUSTOM_KERNELS");
  app.add_option("--cuda-memory-fraction", a.cuda_memory_fraction,
                 "GPU memory share (accepted; no effect on the CPU)")
      ->envname("CUDA_MEMORY_FRACTION")
      ->capture_default_str();
  app.add_option("--rope-scaling", a.rope_scaling,
                 "Override the config's RoPE scaling: linear or dynamic (factor defaults to 1.0)")
      ->envname("ROPE_SCALING");
  app.add_option("--rope-factor", a.rope_factor, "RoPE scaling factor (alone: linear scaling)")
      ->envname("ROPE_FACTOR");
  app.add_flag("--json-output", a.json_output, "One JSON object per log line")
      ->envname("JSON_OUTPUT");
  app.add_option("--otlp-endpoint", a.otlp_endpoint,
                 "Export request traces with OTLP/HTTP (JSON) to this collector URL "
                 "(POST {URL}/v1/traces; a collector's OTLP/HTTP port is 4318)")
      ->envname("OTLP_ENDPOINT");
  app.add_option("--otlp-service-name", a.otlp_service_name, "OTLP service name")
      ->envname("OTLP_SERVICE_NAME")
      ->capture_default_str();
  app.add_option("--cors-allow-origin", a.cors_allow_origin,
                 "Allowed CORS origins (repeatable; none: any)")
      ->envname("CORS_ALLOW_ORIGIN");
  app.add_option("--api-key", a.api_key, "Require `Authorization: Bearer KEY` on generation routes")
      ->envname("API_KEY");
  app.add_option("--watermark-gamma", a.watermark_gamma, "Watermark gamma (refused: not built)")
      ->envname("WATERMARK_GAMMA");
  app.add_option("--watermark-delta", a.watermark_delta, "Watermark delta (refused: not built)")
      ->envname("WATERMARK_DELTA");
  app.add_flag("--ngrok", a.ngrok, "ngrok tunnel (refused: not built)")->envname("NGROK");
  app.add_option("--ngrok-authtoken", a.ngrok_authtoken, "ngrok token")->envname("NGROK_AUTHTOKEN");
  app.add_option("--ngrok-edge", a.ngrok_edge, "ngrok edge")->envname("NGROK_EDGE");
  app.add_option(
         "--tokenizer-config-path", a.tokenizer_config_path,
         "A tokenizer_config.json whose chat template (and bos/eos tokens) replace the model's")
      ->envname("TOKENIZER_CONFIG_PATH");
  app.add_flag("--disable-grammar-support", a.disable_grammar_support,
               "Refuse `grammar` and `response_format` (constrained output)")
      ->envname("DISABLE_GRAMMAR_SUPPORT");
  app.add_option("--max-client-batch-size", a.max_client_batch_size,
                 "Prompts per /v1/completions call")
      ->envname("MAX_CLIENT_BATCH_SIZE")
      ->capture_default_str();
  app.add_option("--lora-adapters", a.lora_adapters, "LoRA adapters (refused: not built)")
      ->envname("LORA_ADAPTERS");
  app.add_option("--usage-stats", a.usage_stats, "on/off/no-stack; nothing is ever sent")
      ->envname("USAGE_STATS")
      ->capture_default_str();
  app.add_option("--payload-limit", a.payload_limit, "Largest request body in bytes")
      ->envname("PAYLOAD_LIMIT")
      ->capture_default_str();
  app.add_flag("--enable-prefill-logprobs", a.enable_prefill_logprobs,
               "Prompt logprobs (refused: not built)")
      ->envname("ENABLE_PREFILL_LOGPROBS");
  app.add_option("-g,--graceful-termination-timeout", a.graceful_termination_timeout,
                 "Seconds to finish in-flight requests after SIGTERM")
      ->envname("GRACEFUL_TERMINATION_TIMEOUT")
      ->capture_default_str();
  app.add_flag("-e,--env", a.env, "Print the runtime environment and exit");
  app.add_option("--num-threads", a.num_threads, "Compute threads (0: one per core)")
      ->envname("NUM_THREADS")
      ->capture_default_str();
  app.add_option("--kv-cache-memory-fraction", a.kv_cache_memory_fraction,
                 "Share of available RAM for the KV cache when --max-batch-total-tokens is unset")
      ->envname("KV_CACHE_MEMORY_FRACTION")
      ->capture_default_str();
  app.add_option("--prefix-caching", a.prefix_caching,
                 "Reuse the KV cache of shared prompt prefixes (true/false)")
      ->envname("PREFIX_CACHING")
      ->capture_default_str();
  app.add_option("--prefix-cache-max-mib", a.prefix_cache_max_mib,
                 "MiB of unused cached prefixes kept resident; the least recently used beyond it "
                 "are dropped and their memory returned (default: a quarter of the KV cache; -1: "
                 "no limit)")
      ->envname("PREFIX_CACHE_MAX_MIB")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40));
  app.add_option("--kv-block-size", a.kv_block_size, "Tokens per KV cache block")
      ->envname("KV_BLOCK_SIZE")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}))
      ->capture_default_str();
  app.add_option("--max-step-latency-ms", a.max_step_latency_ms,
                 "While sequences decode, prefill long prompts in chunks that keep each step "
                 "within this many milliseconds (0: whole prefill budget per step)")
      ->envname("MAX_STEP_LATENCY_MS")
      ->capture_default_str();
  app.add_option("--int8-activations", a.int8_activations,
                 "Quantize activations to int8 for GGML block-format weights (Q4_0 ... Q6_K), as "
                 "llama.cpp does (true/false; false: fp32 activations, transformers' numerics)")
      ->envname("INT8_ACTIVATIONS")
      ->capture_default_str();
  app.add_flag("--dry-run", a.dry_run,
               "Resolve the model, dtype, limits and memory plan, print them (one JSON object with "
               "--json-output) and exit without serving")
      ->envname("DRY_RUN");
  app.add_option("--http-header-timeout-secs", a.http_header_timeout_secs,
                 "Seconds a client has to send a request head, from connecting (or from the next "
                 "request's first byte); then 408 and close (0: no limit)")
      ->envname("HTTP_HEADER_TIMEOUT_SECS")
      ->capture_default_str();
  app.add_option("--http-body-timeout-secs", a.http_body_timeout_secs,
                 "Seconds between two reads of a request body; then 408 and close (0: no limit)")
      ->envname("HTTP_BODY_TIMEOUT_SECS")
      ->capture_default_str();
  app.add_option("--http-keepalive-timeout-secs", a.http_keepalive_timeout_secs,
                 "Seconds an idle kept-alive connection stays open between requests (0: no limit)")
      ->envname("HTTP_KEEPALIVE_TIMEOUT_SECS")
      ->capture_default_str();
  app.add_option("--http-send-timeout-secs", a.http_send_timeout_secs,
                 "Seconds a response write may make no progress (the client stopped reading) "
                 "before the connection is closed and its request cancelled (0: no limit)")
      ->envname("HTTP_SEND_TIMEOUT_SECS")
      ->capture_default_str();
  app.add_option("--http-max-send-buffer-bytes", a.http_max_send_buffer_bytes,
                 "Response bytes a connection may queue behind a pending write; a client further "
                 "behind is closed and its request cancelled")
      ->envname("HTTP_MAX_SEND_BUFFER_BYTES")
      ->capture_default_str();
  app.add_option("--http-socket-send-buffer-bytes", a.http_socket_send_buffer_bytes,
                 "SO_SNDBUF of each connection: what the kernel buffers for a client that stopped "
                 "reading (0: the kernel's autotuning, up to 4 MiB)")
      ->envname("HTTP_SOCKET_SEND_BUFFER_BYTES")
      ->capture_default_str();
  app.add_option("--max-connections", a.max_connections,
                 "Open connections served at once; past it a connection is answered 503 and "
                 "closed (default: half the file descriptor limit, at most 10000; 0: no cap)")
      ->envname("MAX_CONNECTIONS");
  add_device_flag(app, a.device);
  add_cpu_isa_flag(app, a.cpu_isa);
}

void add_device_flag(CLI::App& app, std::string& device) {
  device = "auto";
  app.add_option("--device", device,
                 "cpu, cuda or auto (cuda when this binary was built with CUDA and a GPU is "
                 "visible, else cpu)")
      ->envname("DEVICE")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
}

Result<std::string> resolve_device(const std::string& requested, bool built_with_cuda,
                                   int num_cuda_devices, std::string& note) {
  note.clear();
  if (requested == "cpu") return std::string("cpu");
  if (requested == "cuda") {
    if (!built_with_cuda) {
      return Error{
          "--device cuda: this binary was built without CUDA (nvcc not found at configure "
          "time); use --device cpu"};
    }
    if (num_cuda_devices == 0) {
      return Error{
          "--device cuda: no CUDA device is visible (cudaGetDeviceCount reports none); use "
          "--device cpu"};
    }
    return std::string("cuda");
  }
  if (requested != "auto") return Error{"--device must be cpu, cuda or auto, not " + requested};
  if (!built_with_cuda) {
    note = "Device: cpu (auto; this binary was built without CUDA)";
  } else if (num_cuda_devices == 0) {
    note = "Device: cpu (auto; no CUDA device visible)";
  } else {
    note = "Device: cuda (auto; " + std::to_string(num_cuda_devices) + " CUDA device(s) visible)";
    return std::string("cuda");
  }
  return std::string("cpu");
}

Result<std::string> resolve_device(const std::string& requested, std::string& note) {
#if defined(LM_WITH_CUDA)
  // Asking initializes the CUDA runtime, so --device cpu never does.
  const int num_devices = requested != "cpu" ? kernels::cuda::device_count() : 0;
  return resolve_device(requested, /*built_with_cuda=*/true, num_devices, note);
#else
  return resolve_device(requested, /*built_with_cuda=*/false, 0, note);
#endif
}

}  // namespace lm
