#include "engine/scheduler.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "base/check.h"
#include "engine/kv_window.h"
#include "engine/ngram_proposer.h"

namespace lm {
namespace {

int64_t size_of(const std::vector<int32_t>& v) { return static_cast<int64_t>(v.size()); }

// The prompt tokens `seq` may compute this step out of the budget left: a request that returns
// prompt logprobs needs a row of logits per prompt token, so its chunks stay small.
int64_t chunk_limit(const Sequence& seq, int64_t budget) {
  return seq.wants_prompt_logits() ? std::min(budget, kPromptLogprobChunk) : budget;
}

}  // namespace

Scheduler::Scheduler(EngineConfig config, std::unique_ptr<Proposer> proposer)
    : config_(std::move(config)),
      block_manager_(kv_num_blocks(config_), config_.block_size, config_.max_cached_blocks),
      proposer_(std::move(proposer)),
      governor_(!proposer_ || proposer_->cheap_to_resume()) {
  if (config_.speculate > 0 && !proposer_) proposer_ = std::make_unique<NgramProposer>();
  LM_CHECK(!config_.max_batch_size || *config_.max_batch_size >= 1);
  LM_CHECK(config_.max_batch_prefill_tokens >= 1);
  LM_CHECK(config_.max_batch_total_tokens >= 1);
}

int64_t Scheduler::num_blocks_for(int64_t num_tokens) const {
  return (num_tokens + config_.block_size - 1) / config_.block_size;
}

Status check_fits_empty_batch(const EngineConfig& config, const EngineRequest& request) {
  const auto prompt_len = static_cast<int64_t>(request.prompt_ids.size());
  if (prompt_len == 0) return Error{"the prompt is empty"};
  if (request.max_new_tokens < 1) return Error{"max_new_tokens must be at least 1"};
  const std::string asked = "the prompt (" + std::to_string(prompt_len) +
                            " tokens) plus max_new_tokens (" +
                            std::to_string(request.max_new_tokens) + ")";
  // The last generated token is never computed, so its position needs no KV slot.
  int64_t num_blocks_needed =
      (prompt_len + request.max_new_tokens - 1 + config.block_size - 1) / config.block_size;
  // Under a window a sequence holds only the blocks of its window (and of the prompt chunk it
  // computes, which the scheduler shrinks to what is free), so it fits however long it gets.
  int64_t num_kv_tokens = prompt_len + request.max_new_tokens;
  if (config.kv_window_tokens > 0) {
    num_blocks_needed =
        std::min(num_blocks_needed, max_blocks_spanned(config.kv_window_tokens, config.block_size));
    num_kv_tokens = std::min(num_kv_tokens, num_blocks_needed * config.block_size);
  }
  if (num_kv_tokens > config.max_batch_total_tokens) {
    return Error{asked + " exceeds max_batch_total_tokens (" +
                 std::to_string(config.max_batch_total_tokens) + ")"};
  }
  const int64_t num_usable_blocks = kv_num_blocks(config) - 1;  // block 0 is reserved
  if (num_blocks_needed > num_usable_blocks) {
    return Error{asked + " needs " + std::to_string(num_blocks_needed) +
                 " KV cache blocks but the cache has " + std::to_string(num_usable_blocks)};
  }
  return {};
}

int64_t Scheduler::add(EngineRequest request, std::shared_ptr<TokenSink> sink) {
  LM_CHECK(fits_empty_batch(request));
  const int64_t seq_id = next_seq_id_++;
  waiting_.push_back(std::make_unique<Sequence>(seq_id, std::move(request), std::move(sink)));
  return seq_id;
}

Scheduler::PrefixMatch Scheduler::match_prefix(const Sequence& seq) const {
  PrefixMatch match;
  if (!config_.prefix_caching || !seq.request.use_prefix_cache) return match;
  const int64_t bs = config_.block_size;
  const int64_t max_blocks = (seq.num_tokens() - 1) / bs;  // the last token is always computed
  uint64_t parent = BlockManager::kRootHash;
  for (int64_t i = 0; i < max_blocks; ++i) {
    auto tokens = std::span<const int32_t>(seq.token_ids)
                      .subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs));
    const uint64_t hash = BlockManager::hash_block(parent, tokens);
    const std::optional<int32_t> block_id = block_manager_.lookup(hash, parent, tokens);
    if (!block_id) {
      match.next_hash = hash;
      break;
    }
    match.block_ids.push_back(*block_id);
    match.block_hashes.push_back(hash);
    parent = hash;
  }
  return match;
}

void Scheduler::grow(Sequence& seq, int64_t num_tokens) {
  while (size_of(seq.block_table) < num_blocks_for(num_tokens))
    seq.block_table.push_back(block_manager_.allocate());
}

void Scheduler::hash_blocks(Sequence& seq, int64_t num_tokens,
                            std::unordered_set<uint64_t>& pending) const {
  if (!config_.prefix_caching) return;
  const int64_t bs = config_.block_size;
  for (auto i = static_cast<int64_t>(seq.block_hashes.size()); i < num_tokens / bs; ++i) {
    const uint64_t parent =
        i == 0 ? BlockManager::kRootHash : seq.block_hashes[static_cast<size_t>(i - 1)];
    seq.block_hashes.push_back(BlockManager::hash_block(
        parent, std::span<const int32_t>(seq.token_ids)
                    .subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs))));
    pending.insert(seq.block_hashes.back());
  }
}

void Scheduler::free_blocks(Sequence& seq) {
  // NOTE: tail first, so the LRU evicts a sequence's last blocks before the prefix others share.
  for (auto i = size_of(seq.block_table) - 1; i >= seq.num_released_blocks; --i)
    block_manager_.release(seq.block_table[static_cast<size_t>(i)]);
  seq.block_table.clear();
  seq.block_hashes.clear();
  seq.num_released_blocks = 0;
}

void Scheduler::drop_uncomputed_blocks(Sequence& seq) {
  const int64_t num_kept = num_blocks_for(seq.num_computed_tokens);
  while (size_of(seq.block_table) > num_kept) {
    block_manager_.release(seq.block_table.back());
    seq.block_table.pop_back();
  }
}

void Scheduler::release_out_of_window(Sequence& seq) {
  const int64_t num_before = num_blocks_before_window(config_.kv_window_tokens, config_.block_size,
                                                      seq.num_computed_tokens);
  // Front first: a released block that is cached becomes evictable, oldest first.
  for (; seq.num_released_blocks < num_before; ++seq.num_released_blocks) {
    int32_t& block_id = seq.block_table[static_cast<size_t>(seq.num_released_blocks)];
    block_manager_.release(block_id);
    block_id = kPlaceholderBlock;
  }
}

int64_t Scheduler::num_free_tokens(int64_t num_table_blocks, int64_t num_computed_tokens,
                                   int64_t num_taken) const {
  return (num_table_blocks + block_manager_.num_free_blocks() - num_taken) * config_.block_size -
         num_computed_tokens;
}

void Scheduler::preempt_newest() {
  std::unique_ptr<Sequence> seq = std::move(running_.back());
  running_.pop_back();
  free_blocks(*seq);
  // Recompute: prompt and generated tokens are prefilled again (often from the prefix cache).
  seq->num_computed_tokens = 0;
  seq->status = SequenceStatus::kWaiting;
  num_reserved_tokens_ -= seq->max_tokens();
  waiting_.push_front(std::move(seq));
  ++num_preemptions_;
}

ScheduledSequence Scheduler::entry(const Sequence& seq, int64_t num_tokens) const {
  return ScheduledSequence{
      .sequence = &seq,
      .seq_id = seq.id,
      .first_position = seq.num_computed_tokens,
      .num_tokens = num_tokens,
      .samples = seq.num_computed_tokens + num_tokens == seq.num_tokens(),
      .block_table = seq.block_table,
      .num_placeholder_blocks = seq.num_released_blocks,
  };
}

int64_t Scheduler::fit_chunk(const StepShape& shape, int64_t first_position,
                             int64_t max_tokens) const {
  // (A relative epsilon so that a step predicted at exactly the target, up to rounding, fits.)
  const double target_seconds =
      static_cast<double>(config_.max_step_latency_ms) / 1000.0 * (1 + 1e-9);
  auto fits = [&](int64_t n) {
    StepShape with = shape;
    with.add(first_position, n, /*prefill=*/true);
    return cost_model_.predict_seconds(with) <= target_seconds;
  };
  // The predicted time grows with n: the largest n in [0, max_tokens] that fits.
  int64_t lo = 0;
  int64_t hi = std::max<int64_t>(max_tokens, 0);
  if (!fits(lo)) return 0;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

ScheduledBatch Scheduler::schedule() {
  ScheduledBatch batch;
  StepShape shape{.window = config_.kv_window_tokens};  // of the batch so far, for the target
  const bool latency_aware = config_.max_step_latency_ms > 0;
  const bool windowed = config_.kv_window_tokens > 0;
  int64_t prefill_budget = config_.max_batch_prefill_tokens;
  std::unordered_set<uint64_t> pending;  // keys of the full blocks this step computes
  std::vector<std::pair<size_t, Sequence*>> prefilling;  // (batch index, sequence) of round 1
  std::vector<std::pair<size_t, Sequence*>> decoding;    // the same, computing their newest token
  bool preempted = false;
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence& seq = *running_[i];
    const bool prefill = seq.needs_prefill();
    int64_t n = prefill ? std::min(seq.num_tokens() - seq.num_computed_tokens,
                                   chunk_limit(seq, prefill_budget))
                        : 1;  // a decoding sequence has only its newest token left
    if (prefill && latency_aware) n = std::min(n, config_.min_prefill_chunk_tokens);
    if (n == 0) continue;
    // NOTE: under a window a sequence's chunk shrinks to the free blocks before any sequence is
    // preempted for it: its blocks are bounded, so even one token a step makes progress.
    if (windowed) {
      n = std::max<int64_t>(
          1, std::min(n, num_free_tokens(size_of(seq.block_table), seq.num_computed_tokens)));
    }
    const int64_t end = seq.num_computed_tokens + n;
    const int64_t num_new_blocks = num_blocks_for(end) - size_of(seq.block_table);
    while (!block_manager_.can_allocate(num_new_blocks) && running_.size() > i + 1) {
      preempt_newest();
      preempted = true;
    }
    if (!block_manager_.can_allocate(num_new_blocks)) {
      // The newest cannot grow even alone among newer ones: it yields. The oldest always fits
      // (fits_empty_batch), so some older sequence is running.
      LM_CHECK(i > 0);
      preempt_newest();
      preempted = true;
      break;
    }
    grow(seq, end);
    if (prefill) {
      prefill_budget -= n;
      prefilling.emplace_back(batch.sequences.size(), &seq);
    } else {
      decoding.emplace_back(batch.sequences.size(), &seq);
    }
    hash_blocks(seq, end, pending);
    shape.add(seq.num_computed_tokens, n, prefill);
    batch.sequences.push_back(entry(seq, n));
  }
  // NOTE: the target binds whenever the step serves more than one sequence: a decode, or a
  // newcomer beside a running prompt (its first token is as latency-bound as a decode's next).
  // A lone prompt takes the whole budget.
  const bool capped =
      latency_aware && (shape.num_decode_rows > 0 || batch.sequences.size() + waiting_.size() > 1);
  // NOTE: no admission in a step that had to preempt: blocks are short, and a preempted sequence
  // re-admitted at once would likely be preempted again next step.
  while (!preempted && !waiting_.empty() && prefill_budget > 0) {
    if (config_.max_batch_size && num_running() >= *config_.max_batch_size) break;
    Sequence& seq = *waiting_.front();
    PrefixMatch match = match_prefix(seq);
    // NOTE: a block this very step computes for an earlier entry (best_of candidates, identical
    // prompts arriving together) is not cached yet; the request waits one step and then reuses
    // it rather than computing the same K/V twice. The executor never has to order writes
    // between entries of a batch.
    if (match.next_hash && pending.contains(*match.next_hash)) break;
    const int64_t num_cached_tokens = size_of(match.block_ids) * config_.block_size;
    int64_t n = std::min(seq.num_tokens() - num_cached_tokens, chunk_limit(seq, prefill_budget));
    if (capped) {
      const int64_t floor = std::min(n, config_.min_prefill_chunk_tokens);
      const int64_t fit = fit_chunk(shape, num_cached_tokens, n);
      if (fit < floor && batch.num_admitted > 0) break;
      n = std::max(fit, floor);
    }
    // Under a window the cached blocks wholly before the window of the first position to
    // compute are never read: they stay in the cache unreferenced and the table holds
    // placeholders for them.
    const int64_t num_before =
        num_blocks_before_window(config_.kv_window_tokens, config_.block_size, num_cached_tokens);
    const auto in_window = std::span(match.block_ids).subspan(static_cast<size_t>(num_before));
    const auto num_revived = static_cast<int64_t>(std::ranges::count_if(
        in_window, [&](int32_t id) { return block_manager_.is_evictable(id); }));
    if (windowed) {
      n = std::min(n, num_free_tokens(size_of(match.block_ids), num_cached_tokens, num_revived));
      if (n < 1) break;
    }
    const int64_t num_new_blocks = num_blocks_for(num_cached_tokens + n) - size_of(match.block_ids);
    if (!block_manager_.can_allocate(num_new_blocks + num_revived)) break;

    std::unique_ptr<Sequence> owned = std::move(waiting_.front());
    waiting_.pop_front();
    if (config_.prefix_caching && seq.request.use_prefix_cache) {
      prefix_cache_query_tokens_ += seq.num_tokens();
      prefix_cache_hit_tokens_ += num_cached_tokens;
    }
    for (int32_t id : in_window) block_manager_.acquire(id);
    std::fill_n(match.block_ids.begin(), num_before, kPlaceholderBlock);
    seq.block_table = std::move(match.block_ids);
    seq.num_released_blocks = num_before;
    seq.block_hashes = std::move(match.block_hashes);
    seq.num_computed_tokens = num_cached_tokens;
    seq.status = SequenceStatus::kRunning;
    num_reserved_tokens_ += seq.max_tokens();
    running_.push_back(std::move(owned));
    grow(seq, num_cached_tokens + n);
    prefill_budget -= n;
    hash_blocks(seq, num_cached_tokens + n, pending);
    shape.add(num_cached_tokens, n, /*prefill=*/true);
    batch.sequences.push_back(entry(seq, n));
    ++batch.num_admitted;
  }
  // Round 3 (latency target only): the running prompts' chunks grow into what is left.
  for (auto& [idx, seq] : prefilling) {
    if (!latency_aware) break;
    const int64_t current = batch.sequences[idx].num_tokens;
    const int64_t end = seq->num_computed_tokens + current;
    int64_t extra =
        std::min(seq->num_tokens() - end, chunk_limit(*seq, current + prefill_budget) - current);
    if (capped) extra = fit_chunk(shape, end, extra);
    // Into the blocks free now: round 3 never preempts.
    const int64_t capacity =
        (size_of(seq->block_table) + block_manager_.num_free_blocks()) * config_.block_size - end;
    extra = std::min(extra, capacity);
    if (extra <= 0) continue;
    grow(*seq, end + extra);
    prefill_budget -= extra;
    hash_blocks(*seq, end + extra, pending);
    shape.add(end, extra, /*prefill=*/true);
    batch.sequences[idx] = entry(*seq, end + extra - seq->num_computed_tokens);
  }
  // Round 4 (speculation only): proposals take what the rounds before left.
  if (config_.speculate > 0 && !decoding.empty() &&
      (!config_.adaptive_speculation ||
       governor_.should_propose(static_cast<int64_t>(decoding.size())))) {
    propose(batch, decoding, shape, capped);
  }
  return batch;
}

void Scheduler::propose(ScheduledBatch& batch,
                        const std::vector<std::pair<size_t, Sequence*>>& decoding, StepShape& shape,
                        bool capped) {
  // Each sequence's room, as if the ones before it proposed all they may: one call then
  // proposes for all (a draft model batches them), and what comes back always fits.
  std::vector<ProposalSlot> slots;
  std::vector<std::pair<size_t, Sequence*>> proposing;
  StepShape planned = shape;
  int64_t num_planned_blocks = 0;
  for (const auto& [idx, seq] : decoding) {
    const int64_t end = seq->num_computed_tokens + 1;  // proposals start after the newest token
    // Each accepted proposal is a generated token and so is the token after the last one: with
    // r tokens left, at most r - 1 proposals, so no step computes a position past max_tokens().
    int64_t max_tokens = std::min({config_.speculate, seq->proposal_limit,
                                   seq->request.max_new_tokens - seq->num_generated_tokens() - 1});
    max_tokens =
        std::min(max_tokens, num_free_tokens(size_of(seq->block_table), end, num_planned_blocks));
    if (capped && max_tokens > 0) max_tokens = fit_chunk(planned, end, max_tokens);
    if (max_tokens < 1) continue;
    // A draft model's catch-up on a long prompt that a short answer would not pay back.
    if (config_.adaptive_speculation && !proposer_->cheap_to_resume() &&
        !governor_.catch_up_pays(static_cast<int64_t>(decoding.size()),
                                 proposer_->catch_up_rows(seq->id, seq->token_ids),
                                 seq->request.max_new_tokens - seq->num_generated_tokens()))
      continue;
    num_planned_blocks += num_blocks_for(end + max_tokens) - size_of(seq->block_table);
    planned.add(end, max_tokens, /*prefill=*/true);
    slots.push_back(
        {.seq_id = seq->id, .token_ids = seq->token_ids, .max_tokens = max_tokens, .proposed = {}});
    proposing.emplace_back(idx, seq);
  }
  if (slots.empty()) return;
  proposer_->propose(slots);
  governor_.observe_catch_up(proposer_->last_catch_up_rows(), proposer_->last_catch_up_seconds());
  for (size_t i = 0; i < slots.size(); ++i) {
    auto [idx, seq] = proposing[i];
    std::vector<int32_t>& proposed = slots[i].proposed;
    LM_CHECK(size_of(proposed) <= slots[i].max_tokens);
    if (proposed.empty()) continue;
    const int64_t end = seq->num_computed_tokens + 1;
    const int64_t num_proposed = size_of(proposed);
    grow(*seq, end + num_proposed);
    shape.add(end, num_proposed, /*prefill=*/true);
    batch.sequences[idx] = entry(*seq, 1);
    batch.sequences[idx].proposed_ids = std::move(proposed);
  }
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
  StepOutput out;
  size_t next_sample = 0;
  const int64_t bs = config_.block_size;
  for (const ScheduledSequence& entry : batch.sequences) {
    Sequence* seq = find_running(entry.seq_id);
    LM_CHECK(seq != nullptr && seq->num_computed_tokens == entry.first_position);
    seq->num_computed_tokens += entry.num_tokens;
    if (entry.samples) {
      // The K/V written for an accepted proposal is that of the token now appended there.
      const int64_t accepted = append_tokens(entry, *seq, samples, next_sample, out);
      seq->num_computed_tokens += accepted;
      const auto proposed = static_cast<int64_t>(entry.proposed_ids.size());
      if (proposed > 0) {
        seq->proposal_limit =
            next_proposal_limit(seq->proposal_limit, proposed, accepted, config_.speculate);
      }
    }
    drop_uncomputed_blocks(*seq);
    if (config_.prefix_caching) {
      // Accepted proposals extend the hash chain here; schedule() hashed the known tokens.
      std::unordered_set<uint64_t> unused;
      hash_blocks(*seq, seq->num_computed_tokens, unused);
      // The blocks this step filled now hold computed K/V: later prompts may reuse them.
      for (int64_t i = entry.first_position / bs; i < seq->num_computed_tokens / bs; ++i) {
        const auto idx = static_cast<size_t>(i);
        (void)block_manager_.cache(
            seq->block_table[idx], seq->block_hashes[idx],
            i == 0 ? BlockManager::kRootHash : seq->block_hashes[idx - 1],
            std::span<const int32_t>(seq->token_ids)
                .subspan(idx * static_cast<size_t>(bs), static_cast<size_t>(bs)));
      }
    }
    release_out_of_window(*seq);
  }
  LM_CHECK(next_sample == samples.size());
  remove_if([](const Sequence& seq) { return seq.status == SequenceStatus::kFinished; });
  return out;
}

int64_t Scheduler::append_tokens(const ScheduledSequence& entry, Sequence& seq,
                                 std::span<const SampleResult> samples, size_t& next_sample,
                                 StepOutput& out) {
  // The executor's rule read back: one token for the first row, then one more for each proposal
  // equal to the token chosen just before it.
  const std::vector<int32_t>& proposed = entry.proposed_ids;
  size_t num_matched = 0;
  for (;;) {
    LM_CHECK(next_sample + num_matched < samples.size());
    if (num_matched == proposed.size() ||
        samples[next_sample + num_matched].id != proposed[num_matched])
      break;
    ++num_matched;
  }
  const std::span<const SampleResult> tokens = samples.subspan(next_sample, num_matched + 1);
  next_sample += num_matched + 1;
  int64_t num_appended = 0;
  for (const SampleResult& token : tokens) {
    seq.token_ids.push_back(token.id);
    ++num_appended;
    // TGI's order: length first, then EOS (stop sequences are the sink's business).
    if (seq.num_generated_tokens() >= seq.request.max_new_tokens) {
      seq.finish_reason = FinishReason::kLength;
    } else if (!seq.request.ignore_eos && is_eos(token.id)) {
      seq.finish_reason = FinishReason::kEosToken;
    }
    out.tokens.push_back(
        TokenOutput{.seq_id = seq.id, .sink = seq.sink, .event = {token, seq.finish_reason}});
    if (seq.finish_reason) {
      // The tokens chosen after the one that finished it are dropped.
      seq.status = SequenceStatus::kFinished;
      out.finished_seq_ids.push_back(seq.id);
      break;
    }
  }
  out.num_accepted.push_back(num_appended - 1);
  out.num_proposed.push_back(size_of(proposed));
  out.num_proposed_tokens += size_of(proposed);
  num_proposed_tokens_ += size_of(proposed);
  num_accepted_tokens_ += num_appended - 1;
  seq.speculation.num_proposed += size_of(proposed);
  seq.speculation.num_accepted += num_appended - 1;
  if (seq.finish_reason) out.finished_speculation.push_back(seq.speculation);
  // Every appended token but the last was a proposal whose K/V this step computed (all of them
  // when it finished on a proposal).
  return std::min(static_cast<int64_t>(num_matched), num_appended);
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
  for (size_t i = num_waiting_removed; i < removed.size(); ++i) {
    num_reserved_tokens_ -= removed[i]->max_tokens();
    free_blocks(*removed[i]);
  }
  // Waiting ones too: a preempted sequence keeps what its proposer holds for it.
  if (proposer_) {
    for (const std::unique_ptr<Sequence>& seq : removed) proposer_->release(seq->id);
  }
  return removed;
}

Status Scheduler::check_invariants() const {
  LM_RETURN_IF_ERROR(block_manager_.check_invariants());
  std::map<int32_t, int32_t> refs;
  for (const std::unique_ptr<Sequence>& seq : running_) {
    if (size_of(seq->block_table) != num_blocks_for(seq->num_computed_tokens))
      return Error{"sequence " + std::to_string(seq->id) + ": its block table does not cover " +
                   "exactly its computed tokens"};
    if (seq->num_released_blocks != num_blocks_before_window(config_.kv_window_tokens,
                                                             config_.block_size,
                                                             seq->num_computed_tokens))
      return Error{"sequence " + std::to_string(seq->id) + ": it holds " +
                   std::to_string(seq->num_released_blocks) +
                   " released blocks, not those wholly before its window"};
    for (int64_t i = 0; i < size_of(seq->block_table); ++i) {
      const bool placeholder = i < seq->num_released_blocks;
      if ((seq->block_table[static_cast<size_t>(i)] == kPlaceholderBlock) != placeholder)
        return Error{"sequence " + std::to_string(seq->id) + ": table entry " + std::to_string(i) +
                     (placeholder ? " should" : " should not") + " be a placeholder"};
    }
    if (config_.prefix_caching && static_cast<int64_t>(seq->block_hashes.size()) !=
                                      seq->num_computed_tokens / config_.block_size)
      return Error{"sequence " + std::to_string(seq->id) + ": its hash chain does not cover " +
                   "exactly its full computed blocks"};
    for (auto i = static_cast<size_t>(seq->num_released_blocks); i < seq->block_table.size(); ++i)
      ++refs[seq->block_table[i]];
  }
  for (const std::unique_ptr<Sequence>& seq : waiting_) {
    if (!seq->block_table.empty() || seq->num_computed_tokens != 0)
      return Error{"waiting sequence " + std::to_string(seq->id) + " holds blocks"};
  }
  for (int32_t id = 1; id < block_manager_.num_blocks(); ++id) {
    const auto it = refs.find(id);
    if (block_manager_.ref_count(id) != (it == refs.end() ? 0 : it->second))
      return Error{"block " + std::to_string(id) + ": reference count " +
                   std::to_string(block_manager_.ref_count(id)) + " but " +
                   std::to_string(it == refs.end() ? 0 : it->second) + " table entries"};
  }
  return {};
}

}  // namespace lm
