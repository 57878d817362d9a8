#include "runtime/model_executor.h"

#include <span>
#include <string>

namespace lm {

ModelExecutor::SequenceState::SequenceState(const ModelConfig& config, const Sequence& seq)
    : cache(config, seq.max_tokens()),
      sampler(seq.request.sampling, std::span<const int32_t>(seq.token_ids)
                                        .first(static_cast<size_t>(seq.num_prompt_tokens))) {}

Status ModelExecutor::check_request(const EngineRequest& request) const {
  const ModelConfig& config = model_.config();
  for (int32_t id : request.prompt_ids) {
    if (id < 0 || id >= config.vocab_size)
      return Error{"prompt token id " + std::to_string(id) + " is outside the vocabulary"};
  }
  const auto total = static_cast<int64_t>(request.prompt_ids.size()) + request.max_new_tokens;
  if (total > config.max_context()) {
    return Error{"prompt (" + std::to_string(request.prompt_ids.size()) +
                 " tokens) + max_new_tokens (" + std::to_string(request.max_new_tokens) +
                 ") exceeds the model's context of " + std::to_string(config.max_context()) +
                 " tokens"};
  }
  return {};
}

ModelExecutor::SequenceState& ModelExecutor::state_for(const Sequence& seq) {
  std::unique_ptr<SequenceState>& state = states_[seq.id];
  if (!state) state = std::make_unique<SequenceState>(model_.config(), seq);
  return *state;
}

Result<std::vector<SampleResult>> ModelExecutor::execute(const ScheduledBatch& batch) {
  std::vector<SampleResult> samples;
  // NOTE: sequences run one forward each, one after another. The flat varlen forward over the
  // whole batch (one matmul per layer for every token) arrives with the paged KV cache.
  for (const ScheduledSequence& entry : batch.sequences) {
    SequenceState& state = state_for(*entry.sequence);
    model_.forward(entry.token_ids(), entry.first_position, state.cache.view(),
                   /*all_logits=*/false, logits_, pool_);
    if (!entry.samples) continue;  // a prompt chunk short of the end: its logits are not used
    SampleResult token = state.sampler.sample(logits_);
    state.sampler.observe(token.id);
    samples.push_back(std::move(token));
  }
  return samples;
}

void ModelExecutor::release(int64_t seq_id) { states_.erase(seq_id); }

}  // namespace lm
