// OwnedRanges: contiguous per-thread shares claimed in pieces, the rest taken from the back.
#include "base/owned_ranges.h"

#include <gtest/gtest.h>

#include <thread>
#include <utility>
#include <vector>

namespace lm {
namespace {

using Piece = std::pair<int64_t, int64_t>;
constexpr Piece kNothing{-1, -1};

// The next piece `thread` claims, or kNothing.
Piece claim(OwnedRanges& ranges, int thread) {
  Piece p;
  return ranges.claim(thread, &p.first, &p.second) ? p : kNothing;
}

TEST(OwnedRanges, AThreadTakesItsOwnRangeFrontToBackInPieces) {
  OwnedRanges ranges(10, 2, 3);  // thread 0 owns [0, 5), thread 1 owns [5, 10)
  EXPECT_EQ(claim(ranges, 0), Piece(0, 3));
  EXPECT_EQ(claim(ranges, 0), Piece(3, 5));
  EXPECT_EQ(claim(ranges, 1), Piece(5, 8));
}

TEST(OwnedRanges, AThreadWithNothingLeftTakesFromTheBackOfAnother) {
  OwnedRanges ranges(10, 2, 2);
  EXPECT_EQ(claim(ranges, 0), Piece(0, 2));
  EXPECT_EQ(claim(ranges, 0), Piece(2, 4));
  EXPECT_EQ(claim(ranges, 0), Piece(4, 5));
  EXPECT_EQ(claim(ranges, 0), Piece(8, 10));
  EXPECT_EQ(claim(ranges, 1), Piece(5, 7));
  EXPECT_EQ(claim(ranges, 0), Piece(7, 8));
  EXPECT_EQ(claim(ranges, 0), kNothing);
  EXPECT_EQ(claim(ranges, 1), kNothing);
}

TEST(OwnedRanges, EmptyAndTinyRanges) {
  OwnedRanges empty(0, 3, 4);
  for (int t = 0; t < 3; ++t) EXPECT_EQ(claim(empty, t), kNothing);
  OwnedRanges tiny(1, 3, 4);  // threads 0 and 1 own nothing, thread 2 owns [0, 1)
  EXPECT_EQ(claim(tiny, 0), Piece(0, 1));
  for (int t = 0; t < 3; ++t) EXPECT_EQ(claim(tiny, t), kNothing);
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
