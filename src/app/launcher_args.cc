#include "app/launcher_args.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace lm {
namespace {

Error invalid(const std::string& message) { return Error{"Invalid argument: " + message}; }

Error not_built(const std::string& flag, const std::string& what) {
  return Error{"Invalid argument: " + flag + " is not supported yet: " + what};
}

}  // namespace

Result<std::vector<std::string>> check_launcher_args(const LauncherArgs& a) {
  std::vector<std::string> warnings;
  // TGI's launcher checks, in its order and words.
  if (a.max_input_tokens && a.max_input_length) {
    return invalid("Both `max_input_tokens` (" + std::to_string(*a.max_input_tokens) +
                   ") and `max_input_length` (" + std::to_string(*a.max_input_length) +
                   ") are set. Please define only `max_input_tokens` as `max_input_length is "
                   "deprecated for naming "
                   "consistency.");
  }
  const auto input = a.max_input_tokens ? a.max_input_tokens : a.max_input_length;
  if (input && a.max_total_tokens && *input >= *a.max_total_tokens) {
    return invalid("`max_input_tokens`(" + std::to_string(*input) +
                   ") must be < `max_total_tokens`(" + std::to_string(*a.max_total_tokens) + ")");
  }
  if (a.validation_workers <= 0) return invalid("`validation_workers` must be > 0");
  if (a.max_total_tokens && a.max_batch_total_tokens &&
      *a.max_total_tokens > *a.max_batch_total_tokens) {
    return invalid("`max_total_tokens` must be <= `max_batch_total_tokens`. Given: " +
                   std::to_string(*a.max_total_tokens) + " and " +
                   std::to_string(*a.max_batch_total_tokens));
  }
  if (a.ngrok && !a.ngrok_authtoken)
    return invalid("`ngrok-authtoken` must be set when using ngrok tunneling");
  if (a.ngrok && !a.ngrok_edge)
    return invalid("`ngrok-edge` must be set when using ngrok tunneling");
  if (a.num_shard && *a.num_shard < 1) return invalid("`num_shard` cannot be < 1");
  if (a.max_batch_size && *a.max_batch_size <= 0) return invalid("`max_batch_size` must be > 0");
  if (a.port < 0 || a.port > 65535) return invalid("`port` must be in 0..65535");
  if (a.payload_limit <= 0) return invalid("`payload_limit` must be > 0");
  if (a.max_concurrent_requests <= 0) return invalid("`max_concurrent_requests` must be > 0");
  if (a.usage_stats != "on" && a.usage_stats != "off" && a.usage_stats != "no-stack") {
    return invalid("`usage_stats` must be one of on, off, no-stack");
  }
  if (!(a.kv_cache_memory_fraction > 0 && a.kv_cache_memory_fraction <= 1)) {
    return invalid("`kv_cache_memory_fraction` must be in (0, 1]");
  }

  // Features that are not built yet: refused, never silently ignored.
  if ((a.sharded && *a.sharded == "true") || (a.num_shard && *a.num_shard > 1)) {
    return not_built("sharding (--sharded/--num-shard)",
                     "tensor-parallel sharding is not built yet");
  }
  if (a.sharded && *a.sharded != "true" && *a.sharded != "false")
    return invalid("`sharded` must be true or false");
  if (a.quantize) {
    return not_built("--quantize",
                     "quantize at load time is not built yet; use a pre-quantized GGUF file");
  }
  if (a.speculate) return not_built("--speculate", "speculative decoding is not built yet");
  if (a.dtype)
    return not_built("--dtype", "weights are used in their stored dtype with fp32 compute");
  if (a.kv_cache_dtype) return not_built("--kv-cache-dtype", "the KV cache is fp32");
  if (a.cuda_graphs) return not_built("--cuda-graphs", "the CUDA backend is not built yet");
  if (a.cuda_memory_fraction != 1.0)
    return not_built("--cuda-memory-fraction", "the CUDA backend is not built yet");
  if (a.device != "cpu")
    return not_built("--device " + a.device, "this build has the CPU backend only");
  if (a.rope_scaling || a.rope_factor)
    return not_built("--rope-scaling/--rope-factor", "use the model's config.json");
  if (a.otlp_endpoint) return not_built("--otlp-endpoint", "OpenTelemetry export is not built");
  if (a.watermark_gamma || a.watermark_delta)
    return not_built("--watermark-gamma/--watermark-delta", "watermarking is not built");
  if (a.ngrok) return not_built("--ngrok", "ngrok tunneling is not built");
  if (a.tokenizer_config_path)
    return not_built("--tokenizer-config-path", "chat templates are not built yet");
  if (a.lora_adapters) return not_built("--lora-adapters", "LoRA adapters are not built");
  if (a.enable_prefill_logprobs)
    return not_built("--enable-prefill-logprobs", "prompt logprobs are not built yet");

  if (a.trust_remote_code)
    warnings.push_back(
        "--trust-remote-code has no effect: no model code is ever downloaded or run");
  if (a.disable_custom_kernels)
    warnings.push_back("--disable-custom-kernels has no effect on the CPU backend");
  if (a.max_waiting_tokens != 20 || a.waiting_served_ratio != 0.3) {
    warnings.push_back(
        "`waiting_served_ratio` and `max_waiting_tokens` have no effect: new requests join the "
        "running batch at every step");
  }
  return warnings;
}

Result<ServeSettings> derive_serve_settings(const LauncherArgs& a, const ModelLimits& model,
                                            uint64_t available_memory) {
  ServeSettings s;
  s.max_batch_size = a.max_batch_size;
  const int64_t max_position = std::max<int64_t>(model.max_position_embeddings, 2);
  s.max_batch_prefill_tokens =
      a.max_batch_prefill_tokens.value_or(std::min<int64_t>(4096, max_position));
  if (a.max_batch_total_tokens) {
    s.max_batch_total_tokens = *a.max_batch_total_tokens;
  } else {
    // The KV cache may use a fraction of the RAM left after the weights were mapped.
    const auto budget = static_cast<double>(available_memory) * a.kv_cache_memory_fraction;
    s.max_batch_total_tokens =
        model.kv_bytes_per_token > 0
            ? static_cast<int64_t>(budget / static_cast<double>(model.kv_bytes_per_token))
            : max_position;
    s.max_batch_total_tokens_inferred = true;
  }
  const auto input = a.max_input_tokens ? a.max_input_tokens : a.max_input_length;
  s.max_total_tokens =
      a.max_total_tokens.value_or(std::min(max_position, s.max_batch_total_tokens));
  s.max_input_tokens = input.value_or(s.max_total_tokens - 1);

  // TGI's router checks (chunked prefill is supported, so prefill >= input is not required).
  if (s.max_input_tokens >= s.max_total_tokens) {
    return Error{"Argument validation error: `max_input_tokens` must be < `max_total_tokens`"};
  }
  if (s.max_batch_prefill_tokens > s.max_batch_total_tokens) {
    return Error{
        "Argument validation error: `max_batch_prefill_tokens` must be <= "
        "`max_batch_total_tokens`. Given: " +
        std::to_string(s.max_batch_prefill_tokens) + " and " +
        std::to_string(s.max_batch_total_tokens)};
  }
  if (s.max_total_tokens > s.max_batch_total_tokens) {
    return Error{
        "Argument validation error: `max_total_tokens` must be <= `max_batch_total_tokens`. "
        "Given: " +
        std::to_string(s.max_total_tokens) + " and " + std::to_string(s.max_batch_total_tokens)};
  }
  if (s.max_input_tokens < 1 || s.max_batch_prefill_tokens < 1) {
    return Error{"Argument validation error: token limits must be positive"};
  }
  return s;
}

uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      uint64_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

}  // namespace lm
