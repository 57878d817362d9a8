#include "runtime/cuda/cuda_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <string>
#include <utility>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/logit_processors.h"
#include "kernels/cuda/logit_warpers.h"
#include "kernels/cuda/token_choice.h"
#include "runtime/cuda_graph_sizes.h"
#include "runtime/device_sampling_route.h"
#include "runtime/lap_clock.h"
#include "runtime/request_check.h"

namespace lm::cuda_runtime {
namespace {

namespace kc = kernels::cuda;

}  // namespace

CudaExecutor::CudaExecutor(CudaModel& model, int64_t block_size)
    : model_(model),
      stream_(model.stream()),
      table_width_(model.limits().max_context_len / std::max<int64_t>(block_size, 1) + 2),
      step_sampler_(model.config().vocab_size) {
  LM_CHECK(block_size > 0);
  const int64_t t = model.limits().max_tokens;
  const int64_t vocab = model.config().vocab_size;
  carve(input_memory_,
        {part(token_ids_, t * 4), part(positions_, t * 4), part(query_begins_, (t + 1) * 4),
         part(first_positions_d_, t * 4), part(context_lens_, t * 4), part(logit_rows_, t * 4),
         part(block_tables_, t * table_width_ * 4), part(slot_mapping_, t * 8)});
  const int64_t r = kMaxDeviceSampleRows;
  warper_workspace_bytes_ = kc::warper_workspace_bytes(r, vocab);
  carve(sample_memory_,
        {part(logits_, t * vocab * 4), part(temperature_, r * 4), part(top_p_, r * 4),
         part(typical_p_, r * 4), part(top_k_, r * 4), part(is_random_, r), part(uniforms_, r * 8),
         part(row_max_, r * 4), part(row_log_sum_, r * 4), part(chosen_logprobs_, r * 4),
         part(row_argmax_, r * 4), part(chosen_ids_, r * 4), part(row_sum_exp_, r * 8),
         part(warper_workspace_, static_cast<int64_t>(warper_workspace_bytes_))});
  chosen_host_ = PinnedAllocation(r * 8);
}

CudaExecutor::~CudaExecutor() {
  for (auto& [size, exec] : graphs_) cudaGraphExecDestroy(exec);
}

Status CudaExecutor::check_request(const EngineRequest& request) const {
  return check_request_fits_model(model_.config(), request);
}

template <typename T>
void CudaExecutor::upload(T* device, std::type_identity_t<std::span<const T>> host) {
  if (host.empty()) return;
  // From pageable memory the call returns once the bytes are staged: `host` may change after.
  LM_CUDA_CHECK(
      cudaMemcpyAsync(device, host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream_));
}

DeviceStep CudaExecutor::step_over_inputs(int64_t num_tokens, int64_t num_seqs) const {
  DeviceStep step;
  step.num_tokens = num_tokens;
  step.num_seqs = num_seqs;
  step.token_ids = token_ids_;
  step.positions = positions_;
  step.slot_mapping = slot_mapping_;
  step.block_tables = block_tables_;
  step.query_begins = query_begins_;
  step.first_positions = first_positions_d_;
  return step;
}

void CudaExecutor::upload_decode_inputs() {
  upload(token_ids_, decode_inputs_.token_ids);
  upload(positions_, decode_inputs_.positions);
  upload(slot_mapping_, decode_inputs_.slot_mapping);
  upload(context_lens_, decode_inputs_.context_lens);
  upload(block_tables_, decode_inputs_.block_tables);
}

std::vector<int64_t> CudaExecutor::capture_decode_graphs(const std::vector<int64_t>& sizes) {
  const CudaModelLimits& limits = model_.limits();
  for (const int64_t size : sizes) {
    if (size > limits.max_tokens || size > limits.max_decode_seqs ||
        size > CudaModel::kMaxDecodeAttentionSeqs)
      continue;
    // Padding rows only (decode_graph_inputs.h): the capture touches no sequence's K/V.
    const auto rows = static_cast<size_t>(size);
    decode_inputs_.token_ids.assign(rows, 0);
    decode_inputs_.positions.assign(rows, 0);
    decode_inputs_.slot_mapping.assign(rows, -1);
    decode_inputs_.context_lens.assign(rows, 1);
    decode_inputs_.block_tables.assign(rows * static_cast<size_t>(table_width_), 0);
    upload_decode_inputs();
    DeviceStep step = step_over_inputs(size, size);
    step.max_blocks_per_seq = table_width_;
    step.pure_decode = true;
    step.context_lens = context_lens_;
    // The longest context any sequence reaches: the decode kernel's partitions past a row's own
    // length return at once, so one graph serves every length.
    step.max_context_len = limits.max_context_len;
    step.num_logit_rows = size;
    // One plain run first: cuBLAS picks its kernels and modules load outside the capture.
    model_.forward(step, logits_);
    LM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    cudaGraph_t graph = nullptr;
    LM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    model_.forward(step, logits_);
    LM_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    LM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    LM_CUDA_CHECK(cudaGraphDestroy(graph));
    graphs_[size] = exec;
    graph_sizes_.push_back(size);
  }
  std::sort(graph_sizes_.begin(), graph_sizes_.end());
  return graph_sizes_;
}

void CudaExecutor::enqueue_forward(const BatchInput& in) {
  const int64_t n = in.num_tokens(), num_seqs = in.num_seqs();
  DeviceStep step = step_over_inputs(n, num_seqs);
  if (is_pure_decode(in)) {
    const std::optional<int64_t> size = cuda_graph_size_for(graph_sizes_, num_seqs);
    if (size && in.max_blocks_per_seq <= table_width_) {
      fill_decode_graph_inputs(in, {*size, table_width_}, decode_inputs_);
      upload_decode_inputs();
      LM_CUDA_CHECK(cudaGraphLaunch(graphs_.at(*size), stream_));
      return;
    }
    fill_decode_graph_inputs(in, {num_seqs, in.max_blocks_per_seq}, decode_inputs_);
    upload(context_lens_, decode_inputs_.context_lens);
    step.pure_decode = true;
    step.context_lens = context_lens_;
    step.max_context_len =
        *std::max_element(decode_inputs_.context_lens.begin(), decode_inputs_.context_lens.end());
  }
  LM_CHECK(in.max_blocks_per_seq <= table_width_);
  upload(token_ids_, in.token_ids);
  upload(positions_, in.positions);
  upload(slot_mapping_, in.slot_mapping);
  upload(query_begins_, in.query_begins);
  upload(block_tables_, in.block_tables);
  upload(logit_rows_, in.logit_rows);
  first_positions_.resize(static_cast<size_t>(num_seqs));
  for (int64_t s = 0; s < num_seqs; ++s) {
    first_positions_[static_cast<size_t>(s)] =
        in.positions[static_cast<size_t>(in.query_begins[s])];
    step.max_query_len =
        std::max<int64_t>(step.max_query_len, in.query_begins[s + 1] - in.query_begins[s]);
  }
  upload(first_positions_d_, first_positions_);
  step.max_blocks_per_seq = in.max_blocks_per_seq;
  step.logit_rows = logit_rows_;
  step.num_logit_rows = static_cast<int64_t>(in.logit_rows.size());
  model_.forward(step, logits_);
}

std::vector<std::optional<TokenLogprob>> CudaExecutor::sample_on_device(const ScheduledBatch& batch,
                                                                        int64_t num_rows,
                                                                        bool all_rows) {
  const int64_t vocab = model_.config().vocab_size;
  const auto rows = static_cast<size_t>(num_rows);
  // Each sampling row's route (device_sampling_route.h) and, on the device, its parameters; the
  // host's rows keep the neutral ones (their device scores are unused).
  std::vector<uint8_t> on_device(rows, 0), is_random(rows, 0);
  std::vector<float> temperature(rows, 1.0f), top_p(rows, 1.0f), typical_p(rows, 1.0f);
  std::vector<int32_t> top_k(rows, 0);
  std::vector<double> uniforms(rows, 0.0);
  bool any_device = false, any_temperature = false, any_top_k = false, any_top_p = false,
       any_typical_p = false;
  if (!all_rows) {
    size_t row = 0;
    for (size_t e = 0; e < batch.sequences.size(); ++e) {
      const ScheduledSequence& entry = batch.sequences[e];
      row += static_cast<size_t>(inputs_.num_prompt_rows()[e]);
      if (!entry.samples) continue;
      const EngineRequest& request = entry.sequence->request;
      const SamplingParams& p = request.sampling;
      const size_t n = 1 + entry.proposed_ids.size();
      if (samples_on_device(p, request.grammar != nullptr, !entry.proposed_ids.empty())) {
        any_device = true;
        any_temperature |= p.temperature != 1.0f;
        any_top_k |= p.top_k != 0;
        any_top_p |= p.top_p < 1.0f;
        any_typical_p |= p.typical_p < 1.0f;
        Sampler& sampler = step_sampler_.sampler_for(*entry.sequence);
        for (size_t r = row; r < row + n; ++r) {
          on_device[r] = 1;
          temperature[r] = p.temperature;
          top_k[r] = p.top_k;
          top_p[r] = p.top_p;
          typical_p[r] = p.typical_p;
          is_random[r] = p.is_random() ? 1 : 0;
          // A random row has no proposals (device_sampling_route.h): one draw, as sample() takes.
          if (is_random[r]) uniforms[r] = sampler.next_uniform();
        }
      }
      row += n;
    }
    LM_CHECK(row == rows);
  }
  // The host's rows, raw, before the device chain processes the scores in place. The buffer
  // only grows: rows the host does not sample are never read there.
  const size_t host_floats = rows * static_cast<size_t>(vocab);
  if (host_logits_.size() < host_floats) host_logits_.resize(host_floats);
  for (size_t begin = 0; begin < rows;) {
    if (on_device[begin]) {
      ++begin;
      continue;
    }
    size_t end = begin;
    while (end < rows && !on_device[end]) ++end;
    const size_t offset = begin * static_cast<size_t>(vocab);
    LM_CUDA_CHECK(cudaMemcpyAsync(host_logits_.data() + offset, logits_ + offset,
                                  (end - begin) * static_cast<size_t>(vocab) * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_));
    begin = end;
  }
  if (!any_device) {
    LM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return {};
  }
  upload(temperature_, temperature);
  upload(top_k_, top_k);
  upload(top_p_, top_p);
  upload(typical_p_, typical_p);
  upload(is_random_, is_random);
  upload(uniforms_, uniforms);
  // TGI's chain in the CPU Sampler's order (no bias, penalties or mask on these rows).
  kc::sanitize_scores(logits_, num_rows, vocab, stream_);
  if (any_temperature) kc::apply_temperature(logits_, num_rows, vocab, temperature_, stream_);
  if (any_top_k) kc::apply_top_k(logits_, num_rows, vocab, top_k_, stream_);
  if (any_top_p)
    kc::apply_top_p(logits_, num_rows, vocab, top_p_, warper_workspace_, warper_workspace_bytes_,
                    stream_);
  if (any_typical_p)
    kc::apply_typical_p(logits_, num_rows, vocab, typical_p_, warper_workspace_,
                        warper_workspace_bytes_, stream_);
  const kc::RowSoftmaxStats stats{row_max_, row_argmax_, row_sum_exp_, row_log_sum_};
  kc::log_softmax_stats(logits_, num_rows, vocab, stats, stream_);
  kc::choose_tokens(logits_, num_rows, vocab, stats, is_random_, uniforms_, chosen_ids_,
                    chosen_logprobs_, stream_);
  int32_t* ids = chosen_host_.as<int32_t>();
  auto* logprobs = reinterpret_cast<float*>(ids + kMaxDeviceSampleRows);
  LM_CUDA_CHECK(
      cudaMemcpyAsync(ids, chosen_ids_, rows * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  LM_CUDA_CHECK(cudaMemcpyAsync(logprobs, chosen_logprobs_, rows * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_));
  LM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<std::optional<TokenLogprob>> choices(rows);
  for (size_t r = 0; r < rows; ++r)
    if (on_device[r]) choices[r] = TokenLogprob{ids[r], logprobs[r]};
  return choices;
}

Result<std::vector<SampleResult>> CudaExecutor::execute(const ScheduledBatch& batch) {
  timings_ = {};
  if (batch.empty()) return std::vector<SampleResult>{};
  auto clock = std::chrono::steady_clock::now();
  LM_CHECK(model_.kv_num_blocks() > 0);
  inputs_.build(batch, model_.kv_block_size(), model_.kv_num_blocks());
  const BatchInput in = inputs_.view();
  if (in.num_tokens() > model_.limits().max_tokens) {
    return Error{"a step of " + std::to_string(in.num_tokens()) +
                 " tokens is more than the CUDA runner's workspace holds (" +
                 std::to_string(model_.limits().max_tokens) + ")"};
  }
  std::future<void> grammar_masks = step_sampler_.start_grammar_masks(batch);
  timings_.prepare_seconds = seconds_since(clock);
  enqueue_forward(in);
  const auto num_rows = static_cast<int64_t>(in.logit_rows.size());
  const bool all_rows = reject_non_finite_logits_ || num_rows > kMaxDeviceSampleRows;
  std::vector<std::optional<TokenLogprob>> choices = sample_on_device(batch, num_rows, all_rows);
  if (grammar_masks.valid()) grammar_masks.get();
  timings_.forward_seconds = seconds_since(clock);
  const std::span<float> host_logits(host_logits_.data(),
                                     static_cast<size_t>(num_rows * model_.config().vocab_size));
  if (reject_non_finite_logits_ && !std::all_of(host_logits.begin(), host_logits.end(),
                                                [](float x) { return std::isfinite(x); })) {
    return Error{"the forward of " + std::to_string(batch.num_tokens()) +
                 " tokens produced a non-finite logit on the device"};
  }
  std::vector<SampleResult> samples =
      step_sampler_.sample(batch, inputs_.num_prompt_rows(), host_logits, choices);
  timings_.sample_seconds = seconds_since(clock);
  return samples;
}

}  // namespace lm::cuda_runtime
