#include "engine/ngram_proposer.h"

#include <algorithm>

namespace lm {

std::vector<int32_t> propose_ngram(std::span<const int32_t> token_ids, int64_t max_tokens,
                                   int64_t max_ngram) {
  const auto size = static_cast<int64_t>(token_ids.size());
  if (max_tokens < 1) return {};
  for (int64_t k = std::min(max_ngram, size - 1); k >= 1; --k) {
    const std::span<const int32_t> suffix = token_ids.last(static_cast<size_t>(k));
    // Latest start first; an occurrence must end before the last id so that something follows.
    for (int64_t start = size - k - 1; start >= 0; --start) {
      if (!std::ranges::equal(token_ids.subspan(static_cast<size_t>(start), static_cast<size_t>(k)),
                              suffix))
        continue;
      // NOTE: past the end the copy reads its own output (LZ77's overlapping copy), so a run
      // that repeats with a period shorter than max_tokens is proposed in full, not cut at the
      // end of the known ids.
      std::vector<int32_t> proposed;
      for (int64_t i = start + k; i < start + k + max_tokens; ++i) {
        proposed.push_back(i < size ? token_ids[static_cast<size_t>(i)]
                                    : proposed[static_cast<size_t>(i - size)]);
      }
      return proposed;
    }
  }
  return {};
}

int64_t next_proposal_limit(int64_t limit, int64_t proposed, int64_t accepted, int64_t max) {
  const int64_t current = std::min(limit, max);
  return accepted >= proposed ? std::min(max, current + 2) : std::max<int64_t>(1, current - 1);
}

}  // namespace lm
