// The Llama-family forward on a CUDA device: LlamaModel::forward_batch's steps (model/
// llama_model.cc) over device memory, each a kernels/cuda call enqueued on one stream, fp32
// activations and an fp32 paged K/V pool. Linears of a few rows (decode) run the dequantizing
// GEMV on the stored rows; larger ones round the activations to the weights' 16-bit type
// (dequantizing non-16-bit weights into a scratch first) and run cuBLAS with fp32 accumulation.
// Every buffer is allocated at construction, so a step allocates nothing and a decode step can
// be captured as a CUDA graph.
// NOTE: unlike the CPU kernels these are not batch-invariant: a Linear of more than kGemvMaxRows
// rows takes the fp16 GEMM, and a decode step of up to kMaxDecodeAttentionSeqs sequences the
// split decode attention, so a row's logits can differ in their last bits with the step's size
// (as on TGI's and vLLM's GPUs). The launcher therefore keeps speculation off on the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/cublas_gemm.h"
#include "model/model_config.h"
#include "runtime/cuda/device_allocation.h"
#include "runtime/device_weight_plan.h"

namespace lm::cuda_runtime {

// Device pointers to one step's inputs (the executor uploads them), as model/batch_input.h.
struct DeviceStep {
  int64_t num_tokens = 0, num_seqs = 0;
  const int32_t* token_ids = nullptr;     // [num_tokens]
  const int32_t* positions = nullptr;     // [num_tokens]
  const int64_t* slot_mapping = nullptr;  // [num_tokens]; < 0: not stored
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  int64_t max_blocks_per_seq = 0;
  // Every sequence one token (decode attention): sequence s attends to [0, context_lens[s]).
  bool pure_decode = false;
  const int32_t* context_lens = nullptr;  // [num_seqs]
  int64_t max_context_len = 0;
  // Otherwise (varlen attention): sequence s owns rows [query_begins[s], query_begins[s + 1]),
  // its first at first_positions[s].
  const int32_t* query_begins = nullptr;     // [num_seqs + 1]
  const int32_t* first_positions = nullptr;  // [num_seqs]
  int64_t max_query_len = 0;
  // The rows whose logits are computed, in output order; null: every token in order.
  const int32_t* logit_rows = nullptr;
  int64_t num_logit_rows = 0;
};

struct CudaModelLimits {
  int64_t max_tokens = 0;       // tokens of one step (and logits rows)
  int64_t max_decode_seqs = 0;  // sequences of a step the decode attention kernel takes
  int64_t max_context_len = 0;  // the longest context a step attends to
};

class CudaModel {
 public:
  // Decode steps of more sequences than this take the varlen attention (whose workspace is
  // none) instead of the split decode kernel's partitions.
  static constexpr int64_t kMaxDecodeAttentionSeqs = 256;
  // Linears of at most this many rows run the GEMV once per row (reading the weights from HBM
  // each time, which still beats converting them for a GEMM at decode sizes).
  static constexpr int64_t kGemvMaxRows = 4;

  CudaModel(const ModelConfig& config, DeviceWeightPlan plan, DeviceAllocation weights,
            const CudaModelLimits& limits, cudaStream_t stream);
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  // K and V bytes of one block over all layers (fp32 pool).
  static int64_t kv_bytes_per_block(const ModelConfig& config, int64_t block_size);
  // The pool: per layer [num_blocks, block_size, num_key_value_heads, head_dim] K and V, zeroed.
  void allocate_kv(int64_t num_blocks, int64_t block_size);
  // Frees the pool (the warm-up's, before the free memory is measured).
  void release_kv();

  // Enqueues the forward of `step`: its tokens' K/V into their slots, and logits
  // [num_logit_rows, vocab_size] (device memory) for its logits rows.
  void forward(const DeviceStep& step, float* logits);

  const ModelConfig& config() const { return config_; }
  const DeviceWeightPlan& plan() const { return plan_; }
  const CudaModelLimits& limits() const { return limits_; }
  cudaStream_t stream() const { return stream_; }
  int64_t kv_num_blocks() const { return kv_num_blocks_; }
  int64_t kv_block_size() const { return kv_block_size_; }
  // Device bytes of the weights, the workspaces and the K/V pool.
  int64_t weight_bytes() const { return weights_.bytes(); }
  int64_t workspace_bytes() const { return workspace_.bytes(); }
  int64_t kv_bytes() const { return kv_.bytes(); }

 private:
  // y[rows, m.rows] = x[rows, m.cols] . W^T (+ bias).
  void linear(int32_t matrix, const float* x, float* y, int64_t rows, int32_t bias);
  const float* vector(int32_t index) const;
  const char* matrix_data(const DeviceMatrix& m) const { return weights_.as<char>(m.offset); }

  ModelConfig config_;
  DeviceWeightPlan plan_;
  DeviceAllocation weights_;
  CudaModelLimits limits_;
  cudaStream_t stream_;
  kernels::cuda::CublasGemm gemm_;
  // Workspace: one allocation carved into the activations below.
  DeviceAllocation workspace_;
  float *x_ = nullptr, *normed_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr;
  float *attn_ = nullptr, *gate_ = nullptr, *up_ = nullptr, *decode_partials_ = nullptr;
  void *act16_ = nullptr, *dequantized_ = nullptr, *cublas_workspace_ = nullptr;
  // The K/V pool: one allocation, per layer a K and a V region.
  DeviceAllocation kv_;
  int64_t kv_num_blocks_ = 0, kv_block_size_ = 0;
  std::vector<float*> k_pools_, v_pools_;
};

}  // namespace lm::cuda_runtime
