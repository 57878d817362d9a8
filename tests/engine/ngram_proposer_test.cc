// Prompt-lookup proposals: the earlier occurrence matching the sequence's end furthest back wins
// (up to max_match ids; the latest of equally long ones), runs repeat past the end, and nothing
// is proposed when nothing recurs.
#include "engine/ngram_proposer.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace lm {
namespace {

using Ids = std::vector<int32_t>;

TEST(NgramProposer, ProposesNothingWhenNoSuffixRecurs) {
  EXPECT_EQ(propose_ngram(Ids{1, 2, 3, 4}, 3), Ids{});
  EXPECT_EQ(propose_ngram(Ids{7}, 3), Ids{});
  EXPECT_EQ(propose_ngram(Ids{}, 3), Ids{});
  EXPECT_EQ(propose_ngram(Ids{1, 2, 1, 2}, 0), Ids{});
}

TEST(NgramProposer, TheLongestRecurringSuffixWins) {
  // [1 2 3] recurs at 0 (then 9 2 3); the 1-gram [3] recurs later, at 5 (then 8): 3-gram first.
  EXPECT_EQ(propose_ngram(Ids{1, 2, 3, 9, 2, 3, 8, 1, 2, 3}, 3), (Ids{9, 2, 3}));
  EXPECT_EQ(propose_ngram(Ids{1, 2, 3, 9, 2, 3, 8, 1, 2, 3}, 3, /*max_match=*/1, /*min_match=*/1),
            (Ids{8, 1, 2}));
}

TEST(NgramProposer, AMatchLongerThanAFixedNgramWinsOverALaterOne) {
  // [2 3 4] is followed by 10 at 1 and by 11 at 6; only the first is preceded by 1, as the
  // sequence's end is: a 3-gram lookup would take the later one.
  const Ids ids{1, 2, 3, 4, 10, 9, 2, 3, 4, 11, 7, 1, 2, 3, 4};
  EXPECT_EQ(propose_ngram(ids, 2), (Ids{10, 9}));
  // Compared no further back than max_match: both match as far, the later one wins.
  EXPECT_EQ(propose_ngram(ids, 2, /*max_match=*/3), (Ids{11, 7}));
}

TEST(NgramProposer, CopiesTheLatestEarlierOccurrence) {
  // [1 2] occurs at 0 (then 7) and at 3 (then 8): the latest is copied.
  EXPECT_EQ(propose_ngram(Ids{1, 2, 7, 1, 2, 8, 1, 2}, 3), (Ids{8, 1, 2}));
  EXPECT_EQ(propose_ngram(Ids{1, 2, 7, 1, 2, 8, 1, 2}, 1), (Ids{8}));
}

TEST(NgramProposer, RunsRepeatPastTheEnd) {
  EXPECT_EQ(propose_ngram(Ids{4, 4, 4}, 5), (Ids{4, 4, 4, 4, 4}));
  EXPECT_EQ(propose_ngram(Ids{1, 2, 3, 1, 2, 3}, 4), (Ids{1, 2, 3, 1}));
  EXPECT_EQ(propose_ngram(Ids{6, 5, 6, 5}, 5), (Ids{6, 5, 6, 5, 6}));
}

TEST(NgramProposer, ALoneRecurringTokenProposesNothingByDefault) {
  // 1 recurs, but what preceded it (nothing) does not match 2: a 1-token match.
  EXPECT_EQ(propose_ngram(Ids{1, 9, 2, 1}, 3), Ids{});
  EXPECT_EQ(propose_ngram(Ids{1, 9, 2, 1}, 3, kMaxProposalMatch, /*min_match=*/1), (Ids{9, 2, 1}));
  EXPECT_EQ(propose_ngram(Ids{5, 1, 9, 2, 5, 1}, 2), (Ids{9, 2}));  // 2 tokens: enough
}

TEST(NgramProposer, TheProposalLimitGrowsByTwoWhenAllAreAcceptedAndShrinksByOneOtherwise) {
  EXPECT_EQ(next_proposal_limit(3, 3, 3, 5), 5);
  EXPECT_EQ(next_proposal_limit(4, 2, 2, 5), 5);  // fewer proposed than the limit, all taken
  EXPECT_EQ(next_proposal_limit(5, 3, 1, 5), 4);
  EXPECT_EQ(next_proposal_limit(1, 1, 0, 5), 1);  // never below one
  // The first limit is "none": the configured maximum bounds it.
  EXPECT_EQ(next_proposal_limit(std::numeric_limits<int64_t>::max(), 3, 3, 3), 3);
  EXPECT_EQ(next_proposal_limit(std::numeric_limits<int64_t>::max(), 3, 0, 3), 2);
}

}  // namespace
}  // namespace lm
