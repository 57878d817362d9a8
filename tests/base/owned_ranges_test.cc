// OwnedRanges: contiguous per-thread shares claimed in pieces, the rest taken from the back.
#include "base/owned_ranges.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace lm {
namespace {

TEST(OwnedRanges, AThreadTakesItsOwnRangeFrontToBackInPieces) {
  OwnedRanges ranges(10, 2, 3);  // thread 0 owns [0, 5), thread 1 owns [5, 10)
  int64_t b = 0, e = 0;
  ASSERT_TRUE(ranges.claim(0, &b, &e));
  EXPECT_EQ(b, 0);
  EXPECT_EQ(e, 3);
  ASSERT_TRUE(ranges.claim(0, &b, &e));
  EXPECT_EQ(b, 3);
  EXPECT_EQ(e, 5);
  ASSERT_TRUE(ranges.claim(1, &b, &e));
  EXPECT_EQ(b, 5);
  EXPECT_EQ(e, 8);
}

TEST(OwnedRanges, AThreadWithNothingLeftTakesFromTheBackOfAnother) {
  OwnedRanges ranges(10, 2, 2);
  int64_t b = 0, e = 0;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ranges.claim(0, &b, &e));  // [0,2) [2,4) [4,5)
  ASSERT_TRUE(ranges.claim(0, &b, &e));
  EXPECT_EQ(b, 8);
  EXPECT_EQ(e, 10);
  ASSERT_TRUE(ranges.claim(1, &b, &e));
  EXPECT_EQ(b, 5);
  EXPECT_EQ(e, 7);
  ASSERT_TRUE(ranges.claim(0, &b, &e));
  EXPECT_EQ(b, 7);
  EXPECT_EQ(e, 8);
  EXPECT_FALSE(ranges.claim(0, &b, &e));
  EXPECT_FALSE(ranges.claim(1, &b, &e));
}

TEST(OwnedRanges, EmptyAndTinyRanges) {
  int64_t b = 0, e = 0;
  OwnedRanges empty(0, 3, 4);
  for (int t = 0; t < 3; ++t) EXPECT_FALSE(empty.claim(t, &b, &e));
  OwnedRanges tiny(1, 3, 4);  // threads 0 and 1 own nothing, thread 2 owns [0, 1)
  ASSERT_TRUE(tiny.claim(0, &b, &e));
  EXPECT_EQ(b, 0);
  EXPECT_EQ(e, 1);
  for (int t = 0; t < 3; ++t) EXPECT_FALSE(tiny.claim(t, &b, &e));
}

TEST(OwnedRanges, ConcurrentThreadsClaimEveryIndexExactlyOnce) {
  for (int threads : {2, 3, 5}) {
    for (int64_t piece : {1, 3, 16}) {
      const int64_t n = 10007;
      OwnedRanges ranges(n, threads, piece);
      std::vector<std::vector<int>> seen(static_cast<size_t>(threads),
                                         std::vector<int>(static_cast<size_t>(n), 0));
      std::vector<std::thread> workers;
      for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
          int64_t b = 0, e = 0;
          while (ranges.claim(t, &b, &e)) {
            EXPECT_LT(b, e);
            EXPECT_LE(e - b, piece);
            for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(t)][static_cast<size_t>(i)];
          }
        });
      }
      for (auto& w : workers) w.join();
      for (int64_t i = 0; i < n; ++i) {
        int count = 0;
        for (int t = 0; t < threads; ++t)
          count += seen[static_cast<size_t>(t)][static_cast<size_t>(i)];
        ASSERT_EQ(count, 1) << "index " << i << " threads " << threads << " piece " << piece;
      }
    }
  }
}

}  // namespace
}  // namespace lm
