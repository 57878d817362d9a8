// Percentiles and summaries of text-generation-benchmark, on hand-computed samples.
#include "bench/latency_summary.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

TEST(LatencySummary, NearestRankPercentiles) {
  const std::vector<double> ten = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  EXPECT_EQ(percentile(ten, 50), 5);
  EXPECT_EQ(percentile(ten, 90), 9);
  EXPECT_EQ(percentile(ten, 99), 10);
  EXPECT_EQ(percentile(ten, 100), 10);
  EXPECT_EQ(percentile(ten, 1), 1);
  EXPECT_EQ(percentile({}, 50), 0);
  EXPECT_EQ(percentile({4.5}, 99), 4.5);
}

TEST(LatencySummary, MeanMinMax) {
  const LatencySummary s = summarize({2, 4, 9});
  EXPECT_EQ(s.count, 3);
  EXPECT_DOUBLE_EQ(s.mean, 5);
  EXPECT_EQ(s.min, 2);
  EXPECT_EQ(s.max, 9);
  EXPECT_EQ(s.p50, 4);
  EXPECT_EQ(summarize({}).count, 0);
}

}  // namespace
}  // namespace lm
