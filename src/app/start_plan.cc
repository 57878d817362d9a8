#include "app/start_plan.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace lm {
namespace {

std::string mib(int64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

std::string optional_text(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : "none";
}

}  // namespace

std::string memory_log_line(const StartPlan& p) {
  const ServeSettings& s = p.settings;
  if (!s.max_batch_total_tokens_inferred) {
    return fmt::format("KV budget: --max-batch-total-tokens {} given ({} bytes per token)",
                       s.max_batch_total_tokens, p.limits.kv_bytes_per_token);
  }
  return fmt::format(
      "KV budget from {}: {} available - {} weights - {} margin, x {} = {} for the KV cache "
      "({} bytes per token)",
      p.memory.source, mib(static_cast<int64_t>(p.memory.bytes)), mib(p.limits.weights_bytes),
      mib(s.margin_bytes), p.kv_cache_memory_fraction, mib(s.kv_budget_bytes),
      p.limits.kv_bytes_per_token);
}

std::string dtype_log_line(const StartPlan& p) {
  const WeightsSummary& w = p.weights;
  if (!p.dtype)
    return fmt::format("Weights: {} matrices as stored ({})", w.num_matrices, w.stored_dtypes);
  std::string line = fmt::format("--dtype {}: {} float matrices converted from {}", *p.dtype,
                                 w.num_converted, w.stored_dtypes);
  if (w.num_quantized > 0) {
    line += fmt::format(
        "; {} block-quantized matrices keep their format (compute is fp32 for every dtype)",
        w.num_quantized);
  }
  return line;
}

std::string plan_text(const StartPlan& p) {
  const ServeSettings& s = p.settings;
  std::string out;
  out += fmt::format("Model: {} ({}, {})\n", p.model_id, p.model_path, p.architecture);
  out += dtype_log_line(p) + "\n";
  out += fmt::format("Weights in memory: {}\n", mib(p.limits.weights_bytes));
  out += fmt::format("RoPE scaling: {}\n", p.rope_scaling);
  out += fmt::format("Device: {}, {} threads, CPU kernels {}, int8 activations {}\n", p.device,
                     p.num_threads, p.cpu_isa, p.int8_activations ? "on" : "off");
  out += fmt::format("Memory available: {} ({})\n", mib(static_cast<int64_t>(p.memory.bytes)),
                     p.memory.source);
  out += memory_log_line(p) + "\n";
  out += fmt::format("KV cache dtype: {}, {} bytes per token\n", p.kv_cache_dtype,
                     p.limits.kv_bytes_per_token);
  out += fmt::format("max_batch_total_tokens: {} ({})\n", s.max_batch_total_tokens,
                     s.max_batch_total_tokens_inferred ? "inferred" : "given");
  out += fmt::format("max_total_tokens: {}\nmax_input_tokens: {}\nmax_batch_prefill_tokens: {}\n",
                     s.max_total_tokens, s.max_input_tokens, s.max_batch_prefill_tokens);
  out += fmt::format("max_batch_size: {}\n", optional_text(s.max_batch_size));
  out += fmt::format("KV cache: {} blocks of {} tokens, prefix caching {}\n", p.kv_num_blocks,
                     p.kv_block_size, p.prefix_caching ? "on" : "off");
  if (p.prefix_caching) {
    out += p.prefix_cache_max_blocks >= 0
               ? fmt::format("Prefix cache: at most {} unused blocks kept resident\n",
                             p.prefix_cache_max_blocks)
               : std::string("Prefix cache: no limit on unused blocks kept resident\n");
  }
  out +=
      p.max_step_latency_ms > 0
          ? fmt::format("Step latency target: {} ms (prompt chunks capped while others decode)\n",
                        p.max_step_latency_ms)
          : std::string("Step latency target: off (prompts prefill at full budget)\n");
  if (p.speculate > 0 && !p.draft_model_path.empty()) {
    out += fmt::format("Speculation: up to {} tokens per decode step from the draft model {}\n",
                       p.speculate, p.draft_model_path);
  } else {
    out += p.speculate > 0
               ? fmt::format("Speculation: up to {} n-gram tokens per decode step\n", p.speculate)
               : std::string("Speculation: off\n");
  }
  return out;
}

std::string plan_json(const StartPlan& p) {
  using Json = nlohmann::json;
  const ServeSettings& s = p.settings;
  Json memory = {{"source", p.memory.source},
                 {"available_bytes", p.memory.bytes},
                 {"mem_available_bytes",
                  p.memory.mem_available ? Json(*p.memory.mem_available) : Json(nullptr)},
                 {"weights_bytes", p.limits.weights_bytes},
                 {"margin_bytes", s.margin_bytes},
                 {"kv_cache_memory_fraction", p.kv_cache_memory_fraction},
                 {"kv_budget_bytes", s.kv_budget_bytes},
                 {"kv_bytes_per_token", p.limits.kv_bytes_per_token}};
  if (p.memory.cgroup) {
    memory["cgroup"] = {{"version", p.memory.cgroup->version},
                        {"limit_file", p.memory.cgroup->limit_file},
                        {"limit_bytes", p.memory.cgroup->limit},
                        {"usage_bytes", p.memory.cgroup->usage},
                        {"headroom_bytes", p.memory.cgroup->headroom}};
  } else {
    memory["cgroup"] = nullptr;
  }
  Json j = {{"model_id", p.model_id},
            {"model_path", p.model_path},
            {"architecture", p.architecture},
            {"dtype", p.dtype ? Json(*p.dtype) : Json(nullptr)},
            {"weights",
             {{"stored_dtypes", p.weights.stored_dtypes},
              {"matrices", p.weights.num_matrices},
              {"converted_matrices", p.weights.num_converted},
              {"quantized_matrices", p.weights.num_quantized},
              {"bytes", p.limits.weights_bytes}}},
            {"rope_scaling", p.rope_scaling},
            {"device", p.device},
            {"num_threads", p.num_threads},
            {"cpu_isa", p.cpu_isa},
            {"int8_activations", p.int8_activations},
            {"memory", memory},
            {"max_batch_total_tokens", s.max_batch_total_tokens},
            {"max_batch_total_tokens_inferred", s.max_batch_total_tokens_inferred},
            {"max_total_tokens", s.max_total_tokens},
            {"max_input_tokens", s.max_input_tokens},
            {"max_batch_prefill_tokens", s.max_batch_prefill_tokens},
            {"max_batch_size", s.max_batch_size ? Json(*s.max_batch_size) : Json(nullptr)},
            {"kv_cache_dtype", p.kv_cache_dtype},
            {"kv_block_size", p.kv_block_size},
            {"kv_num_blocks", p.kv_num_blocks},
            {"prefix_caching", p.prefix_caching},
            {"prefix_cache_max_blocks", p.prefix_cache_max_blocks},
            {"max_step_latency_ms", p.max_step_latency_ms},
            {"speculate", p.speculate},
            {"adaptive_speculation", p.adaptive_speculation},
            {"speculative_model_path",
             p.draft_model_path.empty() ? Json(nullptr) : Json(p.draft_model_path)}};
  return j.dump();
}

}  // namespace lm
