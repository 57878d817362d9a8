#include "engine/ngram_proposer.h"

#include <algorithm>

namespace lm {

std::vector<int32_t> propose_ngram(std::span<const int32_t> token_ids, int64_t max_tokens,
                                   int64_t max_match, int64_t min_match) {
  const auto size = static_cast<int64_t>(token_ids.size());
  if (max_tokens < 1 || max_match < 1 || size < 2) return {};
  const auto at = [&](int64_t i) { return token_ids[static_cast<size_t>(i)]; };
  const int64_t last = size - 1;
  // `end` is where an earlier occurrence of the last id ends: before it, so something follows.
  // Latest first, and only a strictly longer match replaces the best, so ties go to the latest;
  // the first one as long as max_match cannot be beaten.
  int64_t best_end = -1;
  int64_t best_length = 0;
  for (int64_t end = last - 1; end >= 0 && best_length < max_match; --end) {
    if (at(end) != at(last)) continue;
    const int64_t bound = std::min(max_match, end + 1);
    int64_t length = 1;
    while (length < bound && at(end - length) == at(last - length)) ++length;
    if (length > best_length) {
      best_length = length;
      best_end = end;
    }
  }
  if (best_end < 0 || best_length < min_match) return {};
  // NOTE: past the end the copy reads its own output (LZ77's overlapping copy), so a run that
  // repeats with a period shorter than max_tokens is proposed in full, not cut at the end of
  // the known ids.
  std::vector<int32_t> proposed;
  for (int64_t i = best_end + 1; i < best_end + 1 + max_tokens; ++i) {
    proposed.push_back(i < size ? at(i) : proposed[static_cast<size_t>(i - size)]);
  }
  return proposed;
}

int64_t next_proposal_limit(int64_t limit, int64_t proposed, int64_t accepted, int64_t max) {
  const int64_t current = std::min(limit, max);
  return accepted >= proposed ? std::min(max, current + 2) : std::max<int64_t>(1, current - 1);
}

}  // namespace lm
