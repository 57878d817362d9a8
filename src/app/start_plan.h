// What a start resolves before it serves (model files, dtype, RoPE, threads, memory, every
// limit), kept in one value: the serve command logs it and --dry-run prints it, as text or as
// one JSON object.
#pragma once

#include <optional>
#include <string>

#include "app/launcher_args.h"
#include "app/memory_limits.h"
#include "model/weight_dtype.h"

namespace lm {

struct StartPlan {
  std::string model_id;
  std::string model_path;
  std::string architecture;
  std::optional<std::string> dtype;  // --dtype as given
  WeightsSummary weights;            // as they will be held (after --dtype)
  std::string rope_scaling;          // e.g. "linear, factor 2 (--rope-scaling)"
  std::string device;
  int64_t num_threads = 0;
  bool int8_activations = true;
  std::string cpu_isa;  // the CPU kernels' level (--cpu-isa or the best this CPU runs)
  AvailableMemory memory;
  ModelLimits limits;
  ServeSettings settings;
  double kv_cache_memory_fraction = 0.5;
  std::string kv_cache_dtype = "fp32";  // --kv-cache-dtype, or the default for the activations
  int64_t kv_block_size = 16;
  int64_t kv_num_blocks = 0;
  bool prefix_caching = true;
  int64_t prefix_cache_max_blocks = -1;  // unused cached blocks kept resident (-1: no limit)
  int64_t max_step_latency_ms = 0;   // the step latency target (0: prefill chunks are not capped)
  int64_t speculate = 0;             // tokens proposed per decode step (0: no speculation)
  bool adaptive_speculation = true;  // proposals only in the steps where they are measured to pay
  std::string draft_model_path;      // --speculative-model-id's files (empty: n-gram proposals)
};

// The sizing in one log line: where the available memory was read and what took it.
std::string memory_log_line(const StartPlan& plan);
// What the weights' dtype will be, e.g. "--dtype float16: 211 float matrices F32 -> F16".
std::string dtype_log_line(const StartPlan& plan);

std::string plan_text(const StartPlan& plan);
std::string plan_json(const StartPlan& plan);

}  // namespace lm
