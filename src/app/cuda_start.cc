#include "app/cuda_start.h"

#if defined(LM_WITH_CUDA)

#include <fmt/format.h>

#include <cstdlib>

#include "base/log.h"
#include "runtime/cuda_graph_sizes.h"
#include "runtime/device_kv_plan.h"

namespace lm {

Result<CudaServing> start_cuda_serving(const LauncherArgs& args, const LlamaModel& model,
                                       ServeSettings& settings, EngineConfig& engine_config) {
  auto graphs = parse_cuda_graph_sizes(args.cuda_graphs, args.quantize);
  if (!graphs.ok()) return graphs.error();
  auto wiggle = parse_wiggle_room(std::getenv("TGI_WIGGLE_ROOM"));
  if (!wiggle.ok()) return wiggle.error();
  // NOTE: the device's GEMMs and attention are not batch-invariant (a row's logits depend on how
  // many rows its step has, as on TGI's and vLLM's GPUs), so verified proposals would not be
  // exactly the tokens plain decoding chooses: speculation stays off on the device.
  if (engine_config.speculate > 0) {
    log_info(
        "Speculation is off on the CUDA backend: its kernels are not batch-invariant, so "
        "verified tokens could differ from plain decoding's");
    engine_config.speculate = 0;
  }
  if (!engine_config.max_batch_size) {
    engine_config.max_batch_size = kDefaultCudaMaxBatchSize;
    log_info(fmt::format("--max-batch-size unset: at most {} sequences per step on the device",
                         kDefaultCudaMaxBatchSize));
  }
  cuda_runtime::CudaStartOptions options;
  options.max_batch_prefill_tokens = engine_config.max_batch_prefill_tokens;
  options.max_batch_size = *engine_config.max_batch_size;
  options.speculate = engine_config.speculate;
  options.max_total_tokens = settings.max_total_tokens;
  options.block_size = engine_config.block_size;
  if (!settings.max_batch_total_tokens_inferred)
    options.max_batch_total_tokens = settings.max_batch_total_tokens;
  options.memory_fraction = args.cuda_memory_fraction;
  options.wiggle_room = *wiggle;
  options.graph_sizes = *graphs;
  auto backend = cuda_runtime::CudaBackend::start(model, options);
  if (!backend.ok()) return backend.error();
  const DeviceKvPlan& kv = (*backend)->kv_plan();
  // TGI's checks after warm-up: a sequence and a prefill must fit the pool; an inferred
  // max_total_tokens is capped by it (min(num_blocks * block_size, max_position_embeddings)).
  if (settings.max_total_tokens > kv.max_batch_total_tokens) {
    if (args.max_total_tokens) {
      return Error{"MAX_TOTAL_TOKENS " + std::to_string(settings.max_total_tokens) +
                   " exceeds the device's KV cache of " +
                   std::to_string(kv.max_batch_total_tokens) + " tokens"};
    }
    settings.max_total_tokens = kv.max_batch_total_tokens;
    if (settings.max_input_tokens >= settings.max_total_tokens) {
      if (args.max_input_tokens || args.max_input_length) {
        return Error{"MAX_INPUT_TOKENS " + std::to_string(settings.max_input_tokens) +
                     " does not fit the device's KV cache of " +
                     std::to_string(kv.max_batch_total_tokens) + " tokens"};
      }
      settings.max_input_tokens = settings.max_total_tokens - 1;
    }
  }
  if (settings.max_batch_prefill_tokens > kv.max_batch_total_tokens) {
    return Error{"MAX_BATCH_PREFILL_TOKENS " + std::to_string(settings.max_batch_prefill_tokens) +
                 " exceeds the device's KV cache of " + std::to_string(kv.max_batch_total_tokens) +
                 " tokens: lower it or raise --cuda-memory-fraction"};
  }
  engine_config.num_blocks = kv.num_blocks;
  engine_config.max_batch_total_tokens = kv.max_batch_total_tokens;
  settings.max_batch_total_tokens = kv.max_batch_total_tokens;
  // TGI's router line after warm-up.
  log_info(fmt::format("Setting max batch total tokens to {}", kv.max_batch_total_tokens));
  CudaServing serving;
  serving.executor = (*backend)->take_executor();
  serving.backend = std::move(*backend);
  return serving;
}

}  // namespace lm

#endif
