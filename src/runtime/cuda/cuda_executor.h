// CudaExecutor: the engine's Executor over a CudaModel. Each step uploads the flat inputs
// (runtime/step_inputs.h), enqueues the forward (a decode step of a captured size replays its
// CUDA graph), samples on the device the rows device_sampling_route.h allows (only their ids and
// logprobs come back) and hands the rest to the StepSampler with their logits rows copied back:
// the tokens, logprobs and stopping are the CPU executor's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include "engine/executor.h"
#include "runtime/cuda/cuda_model.h"
#include "runtime/decode_graph_inputs.h"
#include "runtime/step_inputs.h"
#include "runtime/step_sampler.h"

namespace lm::cuda_runtime {

class CudaExecutor final : public Executor {
 public:
  // Rows sampled on the device in one step at most (the top-p / typical-p sort workspace is
  // sized for them); a step with more logits rows samples every row on the host.
  static constexpr int64_t kMaxDeviceSampleRows = 256;

  // `model` must outlive the executor and have its K/V pool (of blocks of `block_size` tokens)
  // allocated whenever a step runs.
  CudaExecutor(CudaModel& model, int64_t block_size);
  ~CudaExecutor() override;
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  Status check_request(const EngineRequest& request) const override;
  Result<std::vector<SampleResult>> execute(const ScheduledBatch& batch) override;
  void release(int64_t seq_id) override { step_sampler_.release(seq_id); }
  ExecuteTimings last_timings() const override { return timings_; }

  // Captures the decode forward for each of `sizes` (cuda_graph_sizes.h) that a decode step can
  // have; returns the sizes captured. Call once, after the K/V pool is allocated.
  std::vector<int64_t> capture_decode_graphs(const std::vector<int64_t>& sizes);
  // As ModelExecutor's: warm-up fails a step whose logits are not all finite.
  void set_reject_non_finite_logits(bool on) { reject_non_finite_logits_ = on; }
  int64_t num_sequences() const { return step_sampler_.num_sequences(); }

 private:
  // Uploads the step's inputs and enqueues its forward (or graph); logits land in logits_.
  void enqueue_forward(const BatchInput& in);
  // The sampling rows' device choices (empty when no row samples there); copies the rows the
  // host samples (and every row when `all_rows`) into host_logits_ first.
  std::vector<std::optional<TokenLogprob>> sample_on_device(const ScheduledBatch& batch,
                                                            int64_t num_rows, bool all_rows);
  // A step over the input buffers (its arrays' pointers; the rest is the caller's).
  DeviceStep step_over_inputs(int64_t num_tokens, int64_t num_seqs) const;
  // Enqueues decode_inputs_' arrays to the input buffers.
  void upload_decode_inputs();
  // Enqueues a copy of `host` to `device` (T from the device pointer; vectors and spans alike).
  template <typename T>
  void upload(T* device, std::type_identity_t<std::span<const T>> host);

  CudaModel& model_;
  cudaStream_t stream_;
  int64_t table_width_;  // the widest block table a sequence can have
  StepInputs inputs_;
  StepSampler step_sampler_;
  DecodeGraphInputs decode_inputs_;
  std::vector<int32_t> first_positions_;
  // Device inputs (one allocation): the step's arrays at their largest.
  DeviceAllocation input_memory_;
  int32_t *token_ids_ = nullptr, *positions_ = nullptr, *query_begins_ = nullptr;
  int32_t *first_positions_d_ = nullptr, *context_lens_ = nullptr, *logit_rows_ = nullptr;
  int32_t* block_tables_ = nullptr;
  int64_t* slot_mapping_ = nullptr;
  // Logits [max_tokens, vocab] and the device sampler's per-row parameters and results.
  DeviceAllocation sample_memory_;
  float* logits_ = nullptr;
  float *temperature_ = nullptr, *top_p_ = nullptr, *typical_p_ = nullptr;
  int32_t* top_k_ = nullptr;
  uint8_t* is_random_ = nullptr;
  double* uniforms_ = nullptr;
  float *row_max_ = nullptr, *row_log_sum_ = nullptr, *chosen_logprobs_ = nullptr;
  int32_t *row_argmax_ = nullptr, *chosen_ids_ = nullptr;
  double* row_sum_exp_ = nullptr;
  void* warper_workspace_ = nullptr;
  size_t warper_workspace_bytes_ = 0;
  PinnedAllocation chosen_host_;    // ids then logprobs of the device rows
  std::vector<float> host_logits_;  // the host's rows at row * vocab (only grows)
  // Captured decode graphs by batch size, and their sizes ascending (cuda_graph_size_for's list).
  std::map<int64_t, cudaGraphExec_t> graphs_;
  std::vector<int64_t> graph_sizes_;
  bool reject_non_finite_logits_ = false;
  ExecuteTimings timings_;
};

}  // namespace lm::cuda_runtime
