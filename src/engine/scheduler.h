// Scheduler: which sequences compute which tokens each step, under TGI's budgets (spec §5.3) and
// the KV blocks left (preempting by recompute when they run out), and what their results mean
// (length, then EOS). Plain data: no threads, clocks, logging or sinks called; the Engine owns one
// and is its only caller.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/result.h"
#include "engine/block_manager.h"
#include "engine/engine_config.h"
#include "engine/engine_request.h"
#include "engine/proposer.h"
#include "engine/sampled_token.h"
#include "engine/scheduled_batch.h"
#include "engine/sequence.h"
#include "engine/speculation_governor.h"
#include "engine/step_cost_model.h"
#include "engine/token_sink.h"

namespace lm {

// One generated token for one sequence, ready to hand to its sink.
struct TokenOutput {
  int64_t seq_id = 0;
  std::shared_ptr<TokenSink> sink;
  TokenEvent event;  // finish_reason set when this token ended the sequence
};

struct StepOutput {
  std::vector<TokenOutput> tokens;        // batch order; a sequence's own tokens in order
  std::vector<int64_t> finished_seq_ids;  // already removed; their executor state can go
  // Per sampling entry, in batch order: its proposals accepted and delivered (tokens beyond its
  // first this step; always 0 without speculation). TGI's tgi_request_skipped_tokens.
  std::vector<int64_t> num_accepted;
  std::vector<int64_t> num_proposed;  // per sampling entry too: the proposals it verified
  int64_t num_proposed_tokens = 0;    // proposals the batch verified
  // Per sequence that finished this step (length or EOS), its speculation over its life.
  std::vector<RequestSpeculation> finished_speculation;
};

// A non-empty prompt and max_new_tokens within max_batch_total_tokens whose K/V fits the whole
// cache, so it can always run once it is the oldest sequence; else which rule it breaks. Reads
// only `config`, so any thread may ask (Engine::submit does, before queueing).
Status check_fits_empty_batch(const EngineConfig& config, const EngineRequest& request);

class Scheduler {
 public:
  // `proposer` makes the proposals when config.speculate > 0 (null: an NgramProposer).
  explicit Scheduler(EngineConfig config, std::unique_ptr<Proposer> proposer = nullptr);

  // Appends a request to the FIFO queue; returns its sequence id (increasing from 0). The request
  // must fit an empty batch (Engine::submit checks it with check_fits_empty_batch).
  int64_t add(EngineRequest request, std::shared_ptr<TokenSink> sink);
  bool fits_empty_batch(const EngineRequest& request) const {
    return check_fits_empty_batch(config_, request).ok();
  }

  // Running sequences first, in admission order: each prefilling one takes the next chunk of its
  // prompt the prefill budget allows, each decoding one its single new token, growing its block
  // table by whole blocks. When the blocks run out, the newest running sequence is preempted
  // (blocks freed, num_computed_tokens reset to 0, back to the front of the queue) until the
  // older one fits. Then, unless this step preempted, waiting sequences are admitted in FIFO
  // order while the batch size, prefill budget and free blocks allow, each starting after its
  // cached prefix; the first that does not fit stops admission (head-of-line blocking, no
  // skipping ahead). A prompt longer than the prefill budget left is admitted with a chunk of it
  // (TGI's chunked prefill); the rest follows in later steps.
  //
  // With max_step_latency_ms > 0 the prompt tokens are shared out in three rounds:
  //  1. running sequences as above, but a prefilling one takes only min_prefill_chunk_tokens;
  //  2. waiting sequences in FIFO order, each taking the largest chunk that keeps the step's
  //     predicted time (cost_model()) within the target; the first one admitted gets at least
  //     min_prefill_chunk_tokens, later ones stop admission when that much no longer fits;
  //  3. the prefilling running sequences of round 1 extend their chunks, oldest first, with
  //     what the target (and free blocks, without preempting) still allows.
  // The target binds when the step serves more than one sequence (one decodes, or several
  // running or waiting prompts); a lone prompt takes the whole prefill budget. Decodes are never
  // skipped, a prompt arriving behind a long one joins the next step, and every prefilling
  // sequence progresses every step.
  // max_batch_prefill_tokens bounds the step's prompt tokens in every case.
  //
  // With kv_window_tokens > 0 a sequence's chunk also shrinks to the blocks free (before any
  // preemption; a waiting sequence is admitted with what fits), and on admission a prefix-cache
  // hit takes only the cached blocks inside the window of its first position to compute.
  //
  // With speculate > 0, last, each decoding entry of a running sequence (constrained or not) may
  // propose: at most speculate and its proposal_limit, fewer than the tokens it has left to
  // generate (so no position past its max_tokens is ever computed), within the blocks still free
  // (proposals never preempt, nor keep a newcomer out) and, under the latency target, within
  // what the step's predicted time allows, each sequence's room counted as if the ones before it
  // proposed all theirs. One Proposer::propose call fills them all; each table grows to cover
  // what was proposed. With adaptive_speculation, only in the steps the governor allows.
  ScheduledBatch schedule();

  // Applies a computed batch: advances num_computed_tokens, caches the blocks it filled, releases
  // under a window the blocks now wholly before it (placeholders stay in the table), appends
  // the sampled tokens (in order; for an entry with proposals, one more for each proposal its
  // previous token accepted: see ScheduledSequence::proposed_ids), finishes sequences on length
  // then EOS at the token that meets the rule (later ones are dropped) and removes them (freeing
  // their blocks). The K/V of accepted proposals counts as computed; the blocks that held only
  // rejected ones go back to the pool (never cached), so each table again covers exactly its
  // computed tokens.
  StepOutput update(const ScheduledBatch& batch, std::span<const SampleResult> samples);

  // Removes every waiting or running sequence matching `pred` (cancelled, stopped, failed), frees
  // their blocks, releases them from the proposer and hands them back so the caller can notify
  // their sinks.
  std::vector<std::unique_ptr<Sequence>> remove_if(
      const std::function<bool(const Sequence&)>& pred);

  // Between steps: the block manager's invariants, every reference held by exactly the running
  // sequences' block tables, and each table covering exactly its computed tokens. For tests.
  Status check_invariants() const;
  const BlockManager& block_manager() const { return block_manager_; }

  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  // Sum of max_tokens() over running sequences (TGI's batch max_tokens gauge).
  int64_t num_reserved_tokens() const { return num_reserved_tokens_; }
  int64_t num_blocks_used() const { return block_manager_.num_used_blocks(); }
  int64_t num_blocks_total() const { return block_manager_.num_usable_blocks(); }
  int64_t num_blocks_resident() const { return block_manager_.num_resident_blocks(); }
  // Blocks whose memory can be handed back (BlockManager::take_returned_blocks).
  std::vector<int32_t> take_returned_blocks() { return block_manager_.take_returned_blocks(); }
  // Counters since start: prompt (and recomputed) tokens looked up in the prefix cache on
  // admission, how many of them were found, and preemptions.
  int64_t prefix_cache_query_tokens() const { return prefix_cache_query_tokens_; }
  int64_t prefix_cache_hit_tokens() const { return prefix_cache_hit_tokens_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Speculative decoding since start: tokens proposed (and verified), and of them those accepted.
  int64_t num_proposed_tokens() const { return num_proposed_tokens_; }
  int64_t num_accepted_tokens() const { return num_accepted_tokens_; }

  // Predicts step times for max_step_latency_ms; the Engine feeds it each measured step.
  StepCostModel& cost_model() { return cost_model_; }
  const StepCostModel& cost_model() const { return cost_model_; }
  // Decides, with adaptive_speculation, which steps propose; the Engine feeds it each measured
  // pure decode step.
  SpeculationGovernor& speculation_governor() { return governor_; }
  // The proposer in use (null without speculation).
  const Proposer* proposer() const { return proposer_.get(); }

 private:
  // The longest run of cached full blocks at the start of a sequence's tokens, leaving at least
  // its last token to compute, and the key of the first full block after it that missed.
  struct PrefixMatch {
    std::vector<int32_t> block_ids;
    std::vector<uint64_t> block_hashes;
    std::optional<uint64_t> next_hash;
  };

  int64_t num_blocks_for(int64_t num_tokens) const;
  PrefixMatch match_prefix(const Sequence& seq) const;
  // Allocates blocks until the table covers `num_tokens`; can_allocate must hold.
  void grow(Sequence& seq, int64_t num_tokens);
  // Extends the hash chain over the full blocks of [0, num_tokens) and adds the new keys to
  // `pending` (blocks this step computes).
  void hash_blocks(Sequence& seq, int64_t num_tokens, std::unordered_set<uint64_t>& pending) const;
  void free_blocks(Sequence& seq);
  // Releases the blocks past those covering seq's computed tokens (tail first): the ones a step
  // grew for proposals that were rejected. They were never cached.
  void drop_uncomputed_blocks(Sequence& seq);
  // Gives the decoding entries of the batch their proposals (the last round of schedule()).
  // `decoding`: (batch index, sequence) of each running sequence computing its newest token.
  void propose(ScheduledBatch& batch, const std::vector<std::pair<size_t, Sequence*>>& decoding,
               StepShape& shape, bool capped);
  // Appends an entry's sampled tokens (its first, then one per accepted proposal) up to its
  // finish; returns the proposals accepted among them. `next_sample` advances past them all.
  int64_t append_tokens(const ScheduledSequence& entry, Sequence& seq,
                        std::span<const SampleResult> samples, size_t& next_sample,
                        StepOutput& out);
  // Under a window: releases the blocks wholly before the window of seq's next position
  // (kv_window.h), leaving placeholders in its table.
  void release_out_of_window(Sequence& seq);
  // Token slots a sequence could compute into from its next position (num_computed_tokens):
  // its table's num_table_blocks blocks and the free ones, less num_taken free blocks (cached
  // blocks an admission revives).
  int64_t num_free_tokens(int64_t num_table_blocks, int64_t num_computed_tokens,
                          int64_t num_taken = 0) const;
  void preempt_newest();
  ScheduledSequence entry(const Sequence& seq, int64_t num_tokens) const;
  // The most prompt tokens (up to max_tokens) an entry starting at first_position can add to a
  // step of `shape` with the predicted time within max_step_latency_ms; 0 when none fits.
  int64_t fit_chunk(const StepShape& shape, int64_t first_position, int64_t max_tokens) const;
  Sequence* find_running(int64_t seq_id);
  bool is_eos(int32_t id) const;

  EngineConfig config_;
  BlockManager block_manager_;
  StepCostModel cost_model_;
  std::unique_ptr<Proposer> proposer_;
  SpeculationGovernor governor_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  int64_t num_reserved_tokens_ = 0;
  int64_t next_seq_id_ = 0;
  int64_t prefix_cache_query_tokens_ = 0;
  int64_t prefix_cache_hit_tokens_ = 0;
  int64_t num_preemptions_ = 0;
  int64_t num_proposed_tokens_ = 0;
  int64_t num_accepted_tokens_ = 0;
};

}  // namespace lm
