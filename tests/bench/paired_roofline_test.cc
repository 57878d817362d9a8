// The paired roofline's bookkeeping: decode's passes are those from the last first token on, and
// only the passes lying wholly between decode's first and last token are taken out of its time.
#include "bench/paired_roofline.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

using Clock = PairedRoofline::Clock;
using std::chrono::milliseconds;

TEST(PairedRoofline, DecodePassesStartFromTheLastFirstToken) {
  const Clock::time_point t0{};
  PairedRoofline r;
  r.passes = {{t0 + milliseconds(5), t0 + milliseconds(6), 1e9, 0.5},
              {t0 + milliseconds(10), t0 + milliseconds(12), 2e9, 0.9},
              {t0 + milliseconds(20), t0 + milliseconds(23), 3e9, 0.8}};
  const auto decode = r.after(t0 + milliseconds(10));
  ASSERT_EQ(decode.size(), 2u);
  EXPECT_EQ(decode[0].fraction, 0.9);
  EXPECT_EQ(decode[1].bytes_per_second, 3e9);
  EXPECT_TRUE(r.after(t0 + milliseconds(30)).empty());
}

TEST(PairedRoofline, OnlyPassesWithinDecodeAreTakenFromItsTime) {
  const Clock::time_point t0{};
  PairedRoofline r;
  r.passes = {{t0 + milliseconds(1), t0 + milliseconds(3), 1e9, 1},     // before decode
              {t0 + milliseconds(10), t0 + milliseconds(12), 1e9, 1},   // within: 2 ms
              {t0 + milliseconds(20), t0 + milliseconds(25), 1e9, 1},   // within: 5 ms
              {t0 + milliseconds(30), t0 + milliseconds(34), 1e9, 1}};  // after the last token
  EXPECT_NEAR(r.seconds_within(t0 + milliseconds(10), t0 + milliseconds(29)), 0.007, 1e-12);
  EXPECT_NEAR(r.seconds_within(t0 + milliseconds(10), t0 + milliseconds(31)), 0.007, 1e-12);
  EXPECT_EQ(r.seconds_within(t0 + milliseconds(40), t0 + milliseconds(50)), 0);
}

}  // namespace
}  // namespace lm
