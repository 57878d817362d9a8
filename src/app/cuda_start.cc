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
