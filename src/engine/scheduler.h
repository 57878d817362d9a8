// Scheduler: which sequences compute which tokens each step, under TGI's budgets (spec §5.3), and
// what their results mean (length, then EOS). Plain data: no threads, clocks, logging or sinks
// called; the Engine owns one and is its only caller.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/engine_config.h"
#include "engine/engine_request.h"
#include "engine/sampled_token.h"
#include "engine/scheduled_batch.h"
#include "engine/sequence.h"
#include "engine/token_sink.h"

namespace lm {

// One generated token for one sequence, ready to hand to its sink.
struct TokenOutput {
  int64_t seq_id = 0;
  std::shared_ptr<TokenSink> sink;
  TokenEvent event;  // finish_reason set when this token ended the sequence
};

struct StepOutput {
  std::vector<TokenOutput> tokens;        // batch order
  std::vector<int64_t> finished_seq_ids;  // already removed; their executor state can go
};

class Scheduler {
 public:
  explicit Scheduler(EngineConfig config);

  // Appends a request to the FIFO queue; returns its sequence id (increasing from 0). The request
  // must fit an empty batch (Engine::submit checks it with fits_empty_batch).
  int64_t add(EngineRequest request, std::shared_ptr<TokenSink> sink);
  bool fits_empty_batch(const EngineRequest& request) const;

  // Running sequences first: each prefilling one takes the next chunk of its prompt the prefill
  // budget allows, each decoding one its single new token. Then waiting sequences are admitted
  // in FIFO order while the batch-size, token and prefill budgets allow; the first that does not
  // fit stops admission (head-of-line blocking, no skipping ahead). A prompt longer than the
  // prefill budget left is admitted with a chunk of it (TGI's chunked prefill); the rest follows
  // in later steps.
  ScheduledBatch schedule();

  // Applies a computed batch: advances num_computed_tokens, appends the sampled tokens (one per
  // entry with `samples`, in order), finishes sequences on length then EOS and removes them.
  StepOutput update(const ScheduledBatch& batch, std::span<const SampleResult> samples);

  // Removes every waiting or running sequence matching `pred` (cancelled, stopped, failed) and
  // hands them back so the caller can notify their sinks.
  std::vector<std::unique_ptr<Sequence>> remove_if(
      const std::function<bool(const Sequence&)>& pred);

  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  // Sum of max_tokens() over running sequences (TGI's batch max_tokens gauge).
  int64_t num_reserved_tokens() const { return num_reserved_tokens_; }

 private:
  bool can_admit(const Sequence& seq, int64_t prefill_budget) const;
  Sequence* find_running(int64_t seq_id);
  bool is_eos(int32_t id) const;

  EngineConfig config_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  int64_t num_reserved_tokens_ = 0;
  int64_t next_seq_id_ = 0;
};

}  // namespace lm
