// --device cuda: the CUDA runner (runtime/cuda/cuda_backend.h) started with the launcher's
// limits and flags (--cuda-graphs, --cuda-memory-fraction, TGI_WIGGLE_ROOM), and the engine's
// limits updated from the K/V pool it sized from free device memory. Built only with CUDA.
#pragma once

#if defined(LM_WITH_CUDA)

#include <memory>

#include "app/launcher_args.h"
#include "base/result.h"
#include "engine/engine_config.h"
#include "model/llama_model.h"
#include "runtime/cuda/cuda_backend.h"

namespace lm {

// Sequences a CUDA step serves at most when --max-batch-size is unset (vLLM's max_num_seqs
// default): the device workspaces are sized for it.
inline constexpr int64_t kDefaultCudaMaxBatchSize = 256;

struct CudaServing {
  std::unique_ptr<cuda_runtime::CudaBackend> backend;  // must outlive the executor
  std::unique_ptr<Executor> executor;
};

// Starts the runner for `model`; sets engine_config's max_batch_size (when unset),
// num_blocks and max_batch_total_tokens, and settings' max_batch_total_tokens.
Result<CudaServing> start_cuda_serving(const LauncherArgs& args, const LlamaModel& model,
                                       ServeSettings& settings, EngineConfig& engine_config);

}  // namespace lm

#endif
