#include "runtime/draft_proposer.h"

#include <algorithm>
#include <chrono>

#include "base/check.h"

namespace lm {

DraftProposer::DraftProposer(LlamaModel& model, ThreadPool& pool, int64_t num_blocks,
                             int64_t block_size, DType kv_dtype, int64_t num_ids)
    : model_(model),
      pool_(pool),
      kv_(model.config(), num_blocks, block_size, kv_dtype),
      num_ids_(std::min(num_ids, model.config().vocab_size)),
      blocks_(num_blocks, block_size) {
  LM_CHECK(num_blocks >= 2 && num_ids_ >= 1);
}

int64_t DraftProposer::num_kept(const DraftSequence& seq, std::span<const int32_t> token_ids) {
  // The ids it holds K/V for that are still the sequence's (proposals the target rejected are
  // not).
  const auto common = static_cast<int64_t>(std::ranges::mismatch(seq.token_ids, token_ids).in1 -
                                           seq.token_ids.begin());
  return std::min(common, static_cast<int64_t>(token_ids.size()) - 1);
}

int64_t DraftProposer::catch_up_rows(int64_t seq_id, std::span<const int32_t> token_ids) const {
  const auto size = static_cast<int64_t>(token_ids.size());
  if (size == 0) return 0;
  auto it = sequences_.find(seq_id);
  return size - 1 - (it == sequences_.end() ? 0 : num_kept(it->second, token_ids));
}

void DraftProposer::release(int64_t seq_id) {
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return;
  free_blocks(it->second, 0);
  sequences_.erase(it);
}

void DraftProposer::free_blocks(DraftSequence& seq, size_t keep) {
  while (seq.block_table.size() > keep) {
    blocks_.release(seq.block_table.back());
    seq.block_table.pop_back();
  }
}

int64_t DraftProposer::grow(DraftSequence& seq, int64_t num_blocks) {
  while (static_cast<int64_t>(seq.block_table.size()) < num_blocks) {
    if (!blocks_.can_allocate(1)) {
      // The sequence drafted for least recently, outside this call, gives its blocks back.
      auto victim = sequences_.end();
      for (auto it = sequences_.begin(); it != sequences_.end(); ++it) {
        if (it->second.last_used < num_calls_ &&
            (victim == sequences_.end() || it->second.last_used < victim->second.last_used))
          victim = it;
      }
      if (victim == sequences_.end()) break;
      free_blocks(victim->second, 0);
      sequences_.erase(victim);  // pointers to the other sequences stay valid
      continue;
    }
    seq.block_table.push_back(blocks_.allocate());
  }
  return static_cast<int64_t>(seq.block_table.size());
}

void DraftProposer::propose(std::span<ProposalSlot> slots) {
  ++num_calls_;
  last_catch_up_rows_ = 0;
  last_catch_up_seconds_ = 0;
  const int64_t bs = kv_.block_size();
  auto blocks_for = [bs](int64_t num_tokens) { return (num_tokens + bs - 1) / bs; };
  // Marked first, so growing one of them never evicts another.
  for (const ProposalSlot& slot : slots) sequences_[slot.seq_id].last_used = num_calls_;

  std::vector<Draft> drafts;
  std::vector<int32_t> num_rows, tokens, positions;
  for (ProposalSlot& slot : slots) {
    slot.proposed.clear();
    const auto size = static_cast<int64_t>(slot.token_ids.size());
    if (size == 0 || slot.max_tokens < 1) continue;
    DraftSequence& seq = sequences_[slot.seq_id];
    const int64_t keep = num_kept(seq, slot.token_ids);
    seq.token_ids.resize(static_cast<size_t>(keep));
    // K/V is written up to position size + n - 2: the catch-up, then each proposal but the last
    // fed back. Within the draft's context and the blocks it can get.
    int64_t num_tokens = std::min(slot.max_tokens, model_.config().max_context() - size + 1);
    if (num_tokens < 1) continue;
    const int64_t num_blocks = grow(seq, blocks_for(size + num_tokens - 1));
    num_tokens = std::min(num_tokens, num_blocks * bs - size + 1);
    if (num_tokens < 1) {  // no room: it keeps only the blocks of the K/V it holds
      free_blocks(seq, static_cast<size_t>(blocks_for(keep)));
      continue;
    }
    free_blocks(seq, static_cast<size_t>(blocks_for(size + num_tokens - 1)));
    drafts.push_back({.slot = &slot, .sequence = &seq, .num_tokens = num_tokens});
    num_rows.push_back(static_cast<int32_t>(size - keep));
    for (int64_t p = keep; p < size; ++p) {
      tokens.push_back(slot.token_ids[static_cast<size_t>(p)]);
      positions.push_back(static_cast<int32_t>(p));
    }
    // It held the first `keep` ids already: only the rest is appended.
    seq.token_ids.insert(seq.token_ids.end(), slot.token_ids.begin() + keep, slot.token_ids.end());
  }
  last_catch_up_rows_ = static_cast<int64_t>(tokens.size()) - static_cast<int64_t>(drafts.size());
  if (drafts.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  forward(drafts, num_rows, tokens, positions);
  // The catch-up rows' share of the forward that computed them with each draft's first row.
  last_catch_up_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() *
      static_cast<double>(last_catch_up_rows_) / static_cast<double>(tokens.size());
  // Each further proposal: the latest one fed back at the position after it.
  for (int64_t j = 1;; ++j) {
    std::vector<Draft> next;
    num_rows.clear();
    tokens.clear();
    positions.clear();
    for (const Draft& d : drafts) {
      if (d.num_tokens <= j) continue;
      const int32_t id = d.slot->proposed.back();
      tokens.push_back(id);
      positions.push_back(
          static_cast<int32_t>(static_cast<int64_t>(d.slot->token_ids.size()) + j - 1));
      num_rows.push_back(1);
      d.sequence->token_ids.push_back(id);
      next.push_back(d);
    }
    if (next.empty()) break;
    forward(next, num_rows, tokens, positions);
  }
}

void DraftProposer::forward(const std::vector<Draft>& drafts, const std::vector<int32_t>& num_rows,
                            const std::vector<int32_t>& tokens,
                            const std::vector<int32_t>& positions) {
  const int64_t bs = kv_.block_size();
  size_t max_blocks = 1;
  for (const Draft& d : drafts) max_blocks = std::max(max_blocks, d.sequence->block_table.size());
  query_begins_.assign(1, 0);
  slot_mapping_.clear();
  logit_rows_.clear();
  block_tables_.assign(drafts.size() * max_blocks, 0);
  for (size_t s = 0; s < drafts.size(); ++s) {
    const std::vector<int32_t>& table = drafts[s].sequence->block_table;
    std::ranges::copy(table, block_tables_.begin() + static_cast<std::ptrdiff_t>(s * max_blocks));
    const int32_t begin = query_begins_.back();
    for (int32_t r = begin; r < begin + num_rows[s]; ++r) {
      const int64_t p = positions[static_cast<size_t>(r)];
      slot_mapping_.push_back(table[static_cast<size_t>(p / bs)] * bs + p % bs);
    }
    query_begins_.push_back(begin + num_rows[s]);
    logit_rows_.push_back(query_begins_.back() - 1);
  }
  const BatchInput input{.token_ids = tokens,
                         .positions = positions,
                         .slot_mapping = slot_mapping_,
                         .query_begins = query_begins_,
                         .block_tables = block_tables_,
                         .max_blocks_per_seq = static_cast<int64_t>(max_blocks),
                         .logit_rows = logit_rows_,
                         .rope_lengths = {}};
  model_.forward_batch(input, kv_.view(), logits_, pool_);
  num_computed_rows_ += static_cast<int64_t>(tokens.size());
  // Greedy: the lowest id among the largest logits.
  const auto vocab = static_cast<size_t>(model_.config().vocab_size);
  for (size_t s = 0; s < drafts.size(); ++s) {
    const auto row =
        std::span<const float>(logits_).subspan(s * vocab, static_cast<size_t>(num_ids_));
    drafts[s].slot->proposed.push_back(
        static_cast<int32_t>(std::ranges::max_element(row) - row.begin()));
  }
}

}  // namespace lm
