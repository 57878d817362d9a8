#include "engine/scheduler.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace lm {

Scheduler::Scheduler(EngineConfig config) : config_(std::move(config)) {
  LM_CHECK(!config_.max_batch_size || *config_.max_batch_size >= 1);
  LM_CHECK(config_.max_batch_prefill_tokens >= 1);
  LM_CHECK(config_.max_batch_total_tokens >= 1);
}

bool Scheduler::fits_empty_batch(const EngineRequest& request) const {
  const auto prompt_len = static_cast<int64_t>(request.prompt_ids.size());
  return prompt_len >= 1 && request.max_new_tokens >= 1 &&
         prompt_len + request.max_new_tokens <= config_.max_batch_total_tokens;
}

int64_t Scheduler::add(EngineRequest request, std::shared_ptr<TokenSink> sink) {
  LM_CHECK(fits_empty_batch(request));
  const int64_t seq_id = next_seq_id_++;
  waiting_.push_back(std::make_unique<Sequence>(seq_id, std::move(request), std::move(sink)));
  return seq_id;
}

bool Scheduler::can_admit(const Sequence& seq, int64_t prefill_budget) const {
  if (config_.max_batch_size && num_running() >= *config_.max_batch_size) return false;
  if (num_reserved_tokens_ + seq.max_tokens() > config_.max_batch_total_tokens) return false;
  return prefill_budget > 0;
}

ScheduledBatch Scheduler::schedule() {
  ScheduledBatch batch;
  int64_t prefill_budget = config_.max_batch_prefill_tokens;
  auto schedule_tokens = [&](const Sequence& seq) {
    const int64_t remaining = seq.num_tokens() - seq.num_computed_tokens;
    int64_t n = remaining;
    if (seq.is_prefilling()) {
      n = std::min(remaining, prefill_budget);
      prefill_budget -= n;
    } else {
      // A decoding sequence has only its newest sampled token left to compute.
      LM_CHECK(remaining == 1);
    }
    if (n == 0) return;
    batch.sequences.push_back(ScheduledSequence{.sequence = &seq,
                                                .seq_id = seq.id,
                                                .first_position = seq.num_computed_tokens,
                                                .num_tokens = n,
                                                .samples = n == remaining});
  };
  for (const std::unique_ptr<Sequence>& seq : running_) schedule_tokens(*seq);
  while (!waiting_.empty() && can_admit(*waiting_.front(), prefill_budget)) {
    std::unique_ptr<Sequence> seq = std::move(waiting_.front());
    waiting_.pop_front();
    seq->status = SequenceStatus::kRunning;
    num_reserved_tokens_ += seq->max_tokens();
    running_.push_back(std::move(seq));
    schedule_tokens(*running_.back());
  }
  return batch;
}

Sequence* Scheduler::find_running(int64_t seq_id) {
  for (std::unique_ptr<Sequence>& seq : running_) {
    if (seq->id == seq_id) return seq.get();
  }
  return nullptr;
}

bool Scheduler::is_eos(int32_t id) const {
  return std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(), id) !=
         config_.eos_token_ids.end();
}

StepOutput Scheduler::update(const ScheduledBatch& batch, std::span<const SampleResult> samples) {
  LM_CHECK(static_cast<int64_t>(samples.size()) == batch.num_samples());
  StepOutput out;
  size_t sample_idx = 0;
  for (const ScheduledSequence& entry : batch.sequences) {
    Sequence* seq = find_running(entry.seq_id);
    LM_CHECK(seq != nullptr && seq->num_computed_tokens == entry.first_position);
    seq->num_computed_tokens += entry.num_tokens;
    if (!entry.samples) continue;
    const SampleResult& token = samples[sample_idx++];
    seq->token_ids.push_back(token.id);
    // TGI's order: length first, then EOS (stop sequences are the sink's business).
    if (seq->num_generated_tokens() >= seq->request.max_new_tokens) {
      seq->finish_reason = FinishReason::kLength;
    } else if (!seq->request.ignore_eos && is_eos(token.id)) {
      seq->finish_reason = FinishReason::kEosToken;
    }
    if (seq->finish_reason) {
      seq->status = SequenceStatus::kFinished;
      out.finished_seq_ids.push_back(seq->id);
    }
    out.tokens.push_back(
        TokenOutput{.seq_id = seq->id, .sink = seq->sink, .event = {token, seq->finish_reason}});
  }
  remove_if([](const Sequence& seq) { return seq.status == SequenceStatus::kFinished; });
  return out;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::remove_if(
    const std::function<bool(const Sequence&)>& pred) {
  std::vector<std::unique_ptr<Sequence>> removed;
  auto take = [&](auto& queue) {
    auto kept = queue.begin();
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (pred(**it)) {
        removed.push_back(std::move(*it));
      } else {
        if (kept != it) *kept = std::move(*it);
        ++kept;
      }
    }
    queue.erase(kept, queue.end());
  };
  take(waiting_);
  const size_t num_waiting_removed = removed.size();
  take(running_);
  for (size_t i = num_waiting_removed; i < removed.size(); ++i)
    num_reserved_tokens_ -= removed[i]->max_tokens();
  return removed;
}

}  // namespace lm
