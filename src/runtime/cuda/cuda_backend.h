// Starting the model on a CUDA device in TGI's shard order (spec §5.6): weights uploaded
// (device_weight_plan.h), every workspace allocated, a warm-up of a full prefill through the
// executor, the free memory measured and the K/V pool sized from it (device_kv_plan.h), then the
// decode steps captured as CUDA graphs. Owns the stream, the model and, until the engine takes
// it, the executor.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/llama_model.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/cuda/cuda_model.h"
#include "runtime/device_kv_plan.h"

namespace lm::cuda_runtime {

struct CudaStartOptions {
  int device_index = 0;
  // The engine's limits: a step holds at most max_batch_prefill_tokens prompt tokens and
  // max_batch_size decoding sequences of 1 + speculate rows each.
  int64_t max_batch_prefill_tokens = 4096;
  int64_t max_batch_size = 256;
  int64_t speculate = 0;
  int64_t max_total_tokens = 0;  // the longest sequence
  int64_t block_size = 16;
  std::optional<int64_t> max_batch_total_tokens;  // the operator's, when set
  double memory_fraction = 1.0;                   // --cuda-memory-fraction
  double wiggle_room = 0.90;                      // TGI_WIGGLE_ROOM
  std::vector<int64_t> graph_sizes;               // --cuda-graphs, parsed
};

class CudaBackend {
 public:
  // Everything above; errors name what did not fit or what the runner lacks. Logs each stage.
  static Result<std::unique_ptr<CudaBackend>> start(const LlamaModel& model,
                                                    const CudaStartOptions& options);
  ~CudaBackend();
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  // The executor, for the Engine (once). The backend must outlive it.
  std::unique_ptr<CudaExecutor> take_executor() { return std::move(executor_); }
  const DeviceKvPlan& kv_plan() const { return kv_plan_; }
  const std::vector<int64_t>& graph_sizes() const { return graph_sizes_; }
  const CudaModel& model() const { return *model_; }

 private:
  CudaBackend() = default;

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CudaModel> model_;
  std::unique_ptr<CudaExecutor> executor_;
  DeviceKvPlan kv_plan_;
  std::vector<int64_t> graph_sizes_;
};

}  // namespace lm::cuda_runtime
