#include "server/text/stop_sequences.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

TEST(StopSequenceMatcher, MatchesAcrossTokenBoundaries) {
  StopSequenceMatcher m({"</answer>", "\n\n"});
  EXPECT_FALSE(m.feed("The answer is 4<").has_value());
  EXPECT_EQ(m.pending_prefix_length(), 1u);
  EXPECT_FALSE(m.feed("/ans").has_value());
  EXPECT_EQ(m.pending_prefix_length(), 5u);
  EXPECT_EQ(m.feed("wer> trailing"), "</answer>");
}

TEST(StopSequenceMatcher, RulesOutPrefixesAndIgnoresEmptyStops) {
  StopSequenceMatcher m({"stop", ""});
  EXPECT_FALSE(m.feed("sto").has_value());
  EXPECT_EQ(m.pending_prefix_length(), 3u);
  EXPECT_FALSE(m.feed("ck").has_value());
  EXPECT_EQ(m.pending_prefix_length(), 0u);
  EXPECT_EQ(m.feed("xstop"), "stop");
}

TEST(StopSequenceMatcher, NoStopsNeverMatch) {
  StopSequenceMatcher m({});
  EXPECT_FALSE(m.feed("anything").has_value());
  EXPECT_EQ(m.pending_prefix_length(), 0u);
}

TEST(StopSequenceMatcher, LongStreamKeepsWindowBounded) {
  StopSequenceMatcher m({"xyz"});
  for (int i = 0; i < 10000; ++i) EXPECT_FALSE(m.feed("ab").has_value());
  EXPECT_EQ(m.feed("x"), std::nullopt);
  EXPECT_EQ(m.feed("yz"), "xyz");
}

}  // namespace
}  // namespace lm
