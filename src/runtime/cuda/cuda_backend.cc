#include "runtime/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "base/log.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_info.h"
#include "runtime/cuda/weight_upload.h"
#include "runtime/device_weight_plan.h"
#include "runtime/warmup.h"

namespace lm::cuda_runtime {
namespace {

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 30); }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

CudaBackend::~CudaBackend() {
  executor_.reset();
  model_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::start(const LlamaModel& model,
                                                        const CudaStartOptions& o) {
  const ModelConfig& config = model.config();
  if (kernels::cuda::device_count() <= o.device_index)
    return Error{"--device cuda: no CUDA device " + std::to_string(o.device_index) + " is visible"};
  auto plan = plan_device_weights(config, model.weights());
  if (!plan.ok()) return plan.error();
  LM_CUDA_CHECK(cudaSetDevice(o.device_index));
  log_info(fmt::format("CUDA device {}: {}", o.device_index,
                       kernels::cuda::device_description(o.device_index)));

  std::unique_ptr<CudaBackend> backend(new CudaBackend());
  LM_CUDA_CHECK(cudaStreamCreateWithFlags(&backend->stream_, cudaStreamNonBlocking));
  auto clock = std::chrono::steady_clock::now();
  const std::string summary = plan->summary();
  DeviceAllocation weights = upload_weights(*plan);
  log_info(fmt::format("Uploaded the weights in {:.1f}s: {}", seconds_since(clock), summary));

  CudaModelLimits limits;
  limits.max_decode_seqs = o.max_batch_size;
  limits.max_tokens = o.max_batch_prefill_tokens + o.max_batch_size * (1 + o.speculate);
  // A verified proposal can sit past a sequence's last token.
  limits.max_context_len = o.max_total_tokens + o.speculate + 1;
  backend->model_ = std::make_unique<CudaModel>(config, std::move(*plan), std::move(weights),
                                                limits, backend->stream_);
  backend->executor_ = std::make_unique<CudaExecutor>(*backend->model_, o.block_size);
  log_info(fmt::format("Workspaces: {:.2f} GiB for steps of up to {} tokens",
                       gib(backend->model_->workspace_bytes()), limits.max_tokens));

  // TGI's warm-up: a full prefill with every sampling feature, through a pool just for it.
  const int64_t warm_tokens =
      std::max<int64_t>(1, std::min(o.max_batch_prefill_tokens, o.max_total_tokens - 1));
  backend->model_->allocate_kv((warm_tokens + 1 + o.block_size - 1) / o.block_size + 2,
                               o.block_size);
  backend->executor_->set_reject_non_finite_logits(true);
  clock = std::chrono::steady_clock::now();
  if (Status s = warm_up(*backend->executor_, config, warm_tokens, o.block_size); !s.ok())
    return s.error();
  backend->executor_->set_reject_non_finite_logits(false);
  log_info(fmt::format("Warmed up with a prefill of {} tokens in {:.2f}s", warm_tokens,
                       seconds_since(clock)));
  backend->model_->release_kv();

  DeviceKvSizing sizing;
  sizing.memory = device_memory_info();
  sizing.memory_fraction = o.memory_fraction;
  sizing.wiggle_room = o.wiggle_room;
  sizing.kv_bytes_per_block = CudaModel::kv_bytes_per_block(config, o.block_size);
  sizing.block_size = o.block_size;
  sizing.max_batch_total_tokens = o.max_batch_total_tokens;
  auto kv = plan_device_kv(sizing);
  if (!kv.ok()) return kv.error();
  backend->kv_plan_ = *kv;
  backend->model_->allocate_kv(kv->num_blocks, o.block_size);
  log_info(fmt::format(
      "KV cache on the device: {} blocks of {} tokens (fp32), {:.2f} GiB of {:.2f} GiB free "
      "({:.2f} GiB total, --cuda-memory-fraction {}, wiggle room {})",
      kv->num_blocks, o.block_size, gib(backend->model_->kv_bytes()), gib(sizing.memory.free_bytes),
      gib(sizing.memory.total_bytes), o.memory_fraction, o.wiggle_room));

  clock = std::chrono::steady_clock::now();
  backend->graph_sizes_ = backend->executor_->capture_decode_graphs(o.graph_sizes);
  if (!backend->graph_sizes_.empty()) {
    std::string sizes;
    for (int64_t s : backend->graph_sizes_) sizes += (sizes.empty() ? "" : ",") + std::to_string(s);
    log_info(fmt::format("Captured CUDA graphs for decode batch sizes {} in {:.2f}s", sizes,
                         seconds_since(clock)));
  } else {
    log_info("CUDA graphs: none captured (--cuda-graphs 0, or no size fits this batch limit)");
  }
  return backend;
}

}  // namespace lm::cuda_runtime
