// Prompt-lookup proposals for speculative decoding (TGI's n-gram speculation): the tokens that
// followed the most recent earlier occurrence of a sequence's last few tokens in its own prompt
// and output. Repetitive text (code edits, quoting, "rewrite this") repeats long runs, so the
// proposals are often what the model would have generated; the engine verifies them all in one
// forward. Plain data: no model, no state between calls.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/proposer.h"

namespace lm {

// The longest suffix tried first: a 3-token match predicts better than a 1-token one.
inline constexpr int64_t kMaxProposalNgram = 3;

// `max_tokens` ids proposed to follow `token_ids`: for k from max_ngram down to 1, the ids after
// the latest earlier occurrence of the last k ids (one starting before the suffix itself),
// continued periodically past the end. Empty when no suffix recurs or max_tokens < 1.
// O(size * max_ngram).
std::vector<int32_t> propose_ngram(std::span<const int32_t> token_ids, int64_t max_tokens,
                                   int64_t max_ngram = kMaxProposalNgram);

// A sequence's next proposal limit after a step in which it proposed `proposed` tokens (> 0) and
// `accepted` of them were taken: two more when every one was (up to `max`), one fewer otherwise
// (at least 1) -- transformers' heuristic for assisted generation. Text that stops repeating
// soon costs few rejected rows a step; a long quote is followed at full length again quickly.
int64_t next_proposal_limit(int64_t limit, int64_t proposed, int64_t accepted, int64_t max);

// The engine's default Proposer: propose_ngram over each slot's ids.
class NgramProposer final : public Proposer {
 public:
  void propose(std::span<ProposalSlot> slots) override {
    for (ProposalSlot& slot : slots) slot.proposed = propose_ngram(slot.token_ids, slot.max_tokens);
  }
  const char* kind() const override { return "n-gram"; }
};

}  // namespace lm
