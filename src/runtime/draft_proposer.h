// DraftProposer: speculative proposals from a draft model (--speculative-model-id): a smaller or
// lower-bit model with the target's vocabulary continues each sequence greedily, and the target
// verifies what it proposes. A greedy draft proposes one token per position (a point mass), so
// the executor's rule -- accept while the target's own choice equals the proposal -- keeps greedy
// and seeded outputs exactly those of plain decoding.
//
// Every sequence of a step is drafted in one batch: one forward catches each sequence up (its
// prompt the first time, then the tokens the target accepted since) and gives its first
// proposal, then one forward per further proposal. The draft keeps its own paged K/V per
// sequence and the ids it holds K/V for; on the next call only their common prefix with the
// sequence's ids is kept, so rejected proposals are simply written over.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/thread_pool.h"
#include "engine/block_manager.h"
#include "engine/proposer.h"
#include "model/llama_model.h"
#include "runtime/kv_pool.h"

namespace lm {

class DraftProposer final : public Proposer {
 public:
  // `model` and `pool` must outlive the proposer; only the engine thread may use them while an
  // Engine drives it. The draft's K/V pool: `num_blocks` blocks (block 0 reserved) of
  // `block_size` tokens in `kv_dtype`. When it runs out, the sequences least recently drafted
  // for (not in the current call) give theirs back; a sequence that still does not fit proposes
  // fewer tokens, or none. Proposals are ids below `num_ids` (the target's logits width, where
  // the two models pad their vocabularies differently).
  DraftProposer(LlamaModel& model, ThreadPool& pool, int64_t num_blocks, int64_t block_size,
                DType kv_dtype, int64_t num_ids);

  void propose(std::span<ProposalSlot> slots) override;
  void release(int64_t seq_id) override;
  const char* kind() const override { return "draft model"; }
  bool cheap_to_resume() const override { return false; }
  int64_t last_catch_up_rows() const override { return last_catch_up_rows_; }
  double last_catch_up_seconds() const override { return last_catch_up_seconds_; }
  int64_t catch_up_rows(int64_t seq_id, std::span<const int32_t> token_ids) const override;

  // Sequences holding draft K/V, and blocks free in the draft's pool (for tests).
  int64_t num_sequences() const { return static_cast<int64_t>(sequences_.size()); }
  int64_t num_free_blocks() const { return blocks_.num_free_blocks(); }
  // Rows the draft has computed since start: catch-up tokens and fed-back proposals.
  int64_t num_computed_rows() const { return num_computed_rows_; }

 private:
  struct DraftSequence {
    std::vector<int32_t> token_ids;    // the ids whose K/V the draft holds, positions 0, 1, ...
    std::vector<int32_t> block_table;  // covers at least token_ids
    uint64_t last_used = 0;            // the call that last drafted for it
  };
  // One slot being drafted: its sequence and how many tokens it proposes.
  struct Draft {
    ProposalSlot* slot;
    DraftSequence* sequence;
    int64_t num_tokens;
  };

  // Of the sequence's ids, how many the draft holds K/V for and keeps (the last is always
  // computed again: its row gives the first proposal).
  static int64_t num_kept(const DraftSequence& seq, std::span<const int32_t> token_ids);
  // Grows the table to `num_blocks`, taking blocks of sequences not drafted in this call when
  // none are free; returns how many it has.
  int64_t grow(DraftSequence& seq, int64_t num_blocks);
  void free_blocks(DraftSequence& seq, size_t keep);
  // One forward: rows[i] feeds tokens[i] at positions[i] for drafts[seq_of_row]; each draft's
  // last row's argmax is appended to its slot's proposals.
  void forward(const std::vector<Draft>& drafts, const std::vector<int32_t>& num_rows,
               const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions);

  LlamaModel& model_;
  ThreadPool& pool_;
  KvPool kv_;
  int64_t num_ids_;
  BlockManager blocks_;  // the draft pool's block ids (no prefix cache)
  std::unordered_map<int64_t, DraftSequence> sequences_;
  uint64_t num_calls_ = 0;
  int64_t num_computed_rows_ = 0;
  int64_t last_catch_up_rows_ = 0;
  double last_catch_up_seconds_ = 0;
  // The forward's inputs and logits, reused between calls.
  std::vector<int64_t> slot_mapping_;
  std::vector<int32_t> query_begins_, block_tables_, logit_rows_;
  std::vector<float> logits_;
};

}  // namespace lm
