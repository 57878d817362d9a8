#include "app/launcher_args.h"

#include <algorithm>

#include "model/weight_dtype.h"
#include "runtime/kv_pool.h"
#include "server/tracing/otlp_http_sender.h"

namespace lm {
namespace {

constexpr int kOtlpGrpcPort = 4317;

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
  if (a.max_step_latency_ms < 0) return invalid("`max_step_latency_ms` must be >= 0");
  // TGI's is a usize; ours also bounds the rows one sequence adds to a step.
  if (a.speculate && (*a.speculate < 0 || *a.speculate > 64))
    return invalid("`speculate` must be in 0..64");
  for (const auto& [name, secs] :
       {std::pair{"http_header_timeout_secs", a.http_header_timeout_secs},
        std::pair{"http_body_timeout_secs", a.http_body_timeout_secs},
        std::pair{"http_keepalive_timeout_secs", a.http_keepalive_timeout_secs},
        std::pair{"http_send_timeout_secs", a.http_send_timeout_secs}}) {
    // A day at most keeps the milliseconds well inside their range; NaN fails both tests.
    if (!(secs >= 0 && secs <= 86400)) {
      return invalid("`" + std::string(name) + "` must be in 0..86400 (0: no timeout)");
    }
  }
  if (a.http_max_send_buffer_bytes <= 0) return invalid("`http_max_send_buffer_bytes` must be > 0");
  if (a.http_socket_send_buffer_bytes < 0 || a.http_socket_send_buffer_bytes > (int64_t{1} << 30))
    return invalid("`http_socket_send_buffer_bytes` must be in 0..1073741824 (0: the kernel's)");
  if (a.max_connections && *a.max_connections < 0)
    return invalid("`max_connections` must be >= 0 (0: no cap)");
  if (!(a.kv_cache_memory_fraction > 0 && a.kv_cache_memory_fraction <= 1)) {
    return invalid("`kv_cache_memory_fraction` must be in (0, 1]");
  }

  if (a.sharded && *a.sharded != "true" && *a.sharded != "false")
    return invalid("`sharded` must be true or false");
  if (a.dtype && *a.dtype != "float16" && *a.dtype != "bfloat16" && *a.dtype != "float32")
    return invalid("`dtype` must be one of float16, bfloat16, float32");
  if (a.rope_scaling && *a.rope_scaling != "linear" && *a.rope_scaling != "dynamic")
    return invalid("`rope_scaling` must be one of linear, dynamic");
  if (a.rope_factor && !(*a.rope_factor > 0)) return invalid("`rope_factor` must be > 0");

  // Settings that change results and are not built: refused, never silently ignored.
  if ((a.sharded && *a.sharded == "true") || (a.num_shard && *a.num_shard > 1)) {
    return not_built("sharding (--sharded/--num-shard > 1)",
                     "tensor-parallel sharding needs the CUDA model runner (issue 25)");
  }
  // gptq / awq / compressed-tensors / fp8 (and marlin, TGI's GPU kernel for GPTQ/AWQ weights)
  // name a pre-quantized checkpoint's format, checked against its quantization_config at load;
  // ours, q8_0 / q4_0 / q4_1 / q5_0 / q5_1 / q4_k / q5_k / q6_k, and TGI's bitsandbytes (LLM.int8),
  // bitsandbytes-nf4 / -fp4 and eetq, quantize a float checkpoint at load.
  if (a.quantize && *a.quantize != "gptq" && *a.quantize != "awq" &&
      *a.quantize != "compressed-tensors" && *a.quantize != "marlin" &&
      !load_quantization_dtype(*a.quantize)) {
    return not_built("--quantize " + *a.quantize,
                     "of quantizing at load only the GGML block types q8_0, q4_0, q4_1, q5_0, "
                     "q5_1, q4_k, q5_k and q6_k, bitsandbytes (LLM.int8), bitsandbytes-nf4 / "
                     "bitsandbytes-fp4, eetq and fp8 are built (exl2 is issue 20); serve a "
                     "pre-quantized checkpoint (GPTQ, AWQ, compressed-tensors, FP8, or a GGUF "
                     "file) or one of those");
  }
  if (a.lora_adapters) return not_built("--lora-adapters", "LoRA adapters are not built");
  if (a.kv_cache_dtype && !parse_kv_cache_dtype(*a.kv_cache_dtype)) {
    return Error{"--kv-cache-dtype " + *a.kv_cache_dtype + ": expected " +
                 std::string(kKvCacheDtypeChoices)};
  }
  if (a.device != "cpu" && a.device != "cuda")
    return not_built("--device " + a.device, "the backends are cpu and cuda");
  if (a.watermark_gamma || a.watermark_delta)
    return not_built("--watermark-gamma/--watermark-delta", "watermarking is not built");
  if (a.ngrok) return not_built("--ngrok", "ngrok tunneling is not built (TGI's is broken too)");

  // Accepted; harmless here. Each is logged once so that nobody expects an effect.
  if (a.trust_remote_code)
    warnings.push_back(
        "--trust-remote-code has no effect: no model code is ever downloaded or run");
  if (a.disable_custom_kernels)
    warnings.push_back(std::string("--disable-custom-kernels has no effect on the ") +
                       (a.device == "cuda" ? "CUDA" : "CPU") + " backend");
  if (a.device == "cpu") {
    if (a.cuda_graphs)
      warnings.push_back("--cuda-graphs " + *a.cuda_graphs + " has no effect on the CPU backend");
    if (a.cuda_memory_fraction != 1.0) {
      warnings.push_back(
          "--cuda-memory-fraction has no effect on the CPU backend (the KV cache takes "
          "--kv-cache-memory-fraction of the available RAM)");
    }
  } else {
    if (a.cuda_memory_fraction <= 0.0 || a.cuda_memory_fraction > 1.0)
      return invalid("`cuda_memory_fraction` must be in (0, 1]");
    if (a.kv_cache_dtype && *parse_kv_cache_dtype(*a.kv_cache_dtype) != DType::kF32)
      warnings.push_back("--kv-cache-dtype " + *a.kv_cache_dtype +
                         " has no effect on the CUDA backend yet (its KV cache is fp32)");
  }
  if (a.speculative_model_id && a.speculate == 0) {
    warnings.push_back(
        "--speculative-model-id has no effect with --speculate 0: the draft model "
        "is not loaded");
  } else if (a.speculative_model_id && a.device == "cuda") {
    warnings.push_back(
        "--speculative-model-id has no effect on the CUDA backend (speculation is "
        "off there): the draft model is not loaded");
  }
  // TGI exports OTLP/gRPC; we speak OTLP/HTTP, whose collector port is 4318.
  if (a.otlp_endpoint && url_port(*a.otlp_endpoint) == kOtlpGrpcPort) {
    warnings.push_back("--otlp-endpoint " + *a.otlp_endpoint +
                       ": port 4317 is OTLP/gRPC's, but traces are exported with OTLP/HTTP "
                       "(JSON), which a collector receives on port 4318");
  }
  if (a.max_waiting_tokens != 20 || a.waiting_served_ratio != 0.3) {
    warnings.push_back(
        "`waiting_served_ratio` and `max_waiting_tokens` have no effect: new requests join the "
        "running batch at every step");
  }
  return warnings;
}

Result<std::optional<DType>> launcher_dtype(const LauncherArgs& a) {
  if (!a.dtype) return std::optional<DType>();
  if (*a.dtype == "float16") return std::optional<DType>(DType::kF16);
  if (*a.dtype == "bfloat16") return std::optional<DType>(DType::kBF16);
  if (*a.dtype == "float32") return std::optional<DType>(DType::kF32);
  return invalid("`dtype` must be one of float16, bfloat16, float32");
}

Result<std::optional<RopeScalingOverride>> launcher_rope_scaling(const LauncherArgs& a) {
  if (!a.rope_scaling && !a.rope_factor) return std::optional<RopeScalingOverride>();
  RopeScalingOverride rope;
  rope.factor = a.rope_factor.value_or(1.0);
  if (!(rope.factor > 0)) return invalid("`rope_factor` must be > 0");
  const std::string type = a.rope_scaling.value_or("linear");
  if (type == "linear") {
    rope.type = RopeType::kLinear;
  } else if (type == "dynamic") {
    rope.type = RopeType::kDynamic;
  } else {
    return invalid("`rope_scaling` must be one of linear, dynamic");
  }
  return std::optional<RopeScalingOverride>(rope);
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
    // NOTE: `available_memory` is measured before the weights are loaded, and MemAvailable counts
    // the page cache of mapped weight files as available, so the weights are taken off it whole;
    // the margin covers the forward's workspace at the largest prefill and the process itself.
    s.margin_bytes =
        kFixedMarginBytes + s.max_batch_prefill_tokens * model.activation_bytes_per_token;
    const int64_t left = static_cast<int64_t>(std::min<uint64_t>(available_memory, INT64_MAX)) -
                         model.weights_bytes - s.margin_bytes;
    s.kv_budget_bytes = static_cast<int64_t>(static_cast<double>(std::max<int64_t>(left, 0)) *
                                             a.kv_cache_memory_fraction);
    s.max_batch_total_tokens =
        model.kv_bytes_per_token > 0 ? s.kv_budget_bytes / model.kv_bytes_per_token : max_position;
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

}  // namespace lm
