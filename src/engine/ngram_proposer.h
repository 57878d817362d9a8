// Prompt-lookup proposals for speculative decoding (TGI's n-gram speculation): the tokens that
// followed the earlier occurrence of a sequence's last tokens in its own prompt and output that
// matches them furthest back. Repetitive text (code edits, quoting, "rewrite this") repeats long
// runs, so the proposals are often what the model would have generated; the engine verifies
// them all in one forward. Plain data: no model, no state between calls.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/proposer.h"

namespace lm {

// How far back a match is compared. A fixed short n-gram (3 tokens) is ambiguous in code and
// quoted prose -- "    //", ", the" recur everywhere, and their latest occurrence is often the
// wrong one: replaying the benchmark's tasks (scripts/bench/speculate_vs_llama_cpp.py), 63% of
// 3-gram proposals were accepted on the code task and 73% on the quote one, against 88% and 83%
// for the longest match. Past 16 tokens no task's choice changed; 32 bounds the scan.
inline constexpr int64_t kMaxProposalMatch = 32;
// The shortest match that proposes. The token after a lone recurring token is a poor guess: in
// the replay, the first proposal was accepted after 23% of 1-token matches (13 of 53, every
// task), 63% of 2-token ones and 75% of 3-token ones, while a proposed row costs a third or more
// of a plain decode step on a CPU.
inline constexpr int64_t kMinProposalMatch = 2;

// `max_tokens` ids proposed to follow `token_ids`: those after the earlier occurrence of the last
// id whose preceding ids agree with the sequence's own furthest back (up to `max_match` ids in
// all; the latest of equally long ones), continued periodically past the end. Empty when no
// occurrence matches `min_match` ids or max_tokens < 1. O(size * max_match), about O(size) on
// real text.
std::vector<int32_t> propose_ngram(std::span<const int32_t> token_ids, int64_t max_tokens,
                                   int64_t max_match = kMaxProposalMatch,
                                   int64_t min_match = kMinProposalMatch);

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
