#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "base/byte_reader.h"
#include "base/fp16.h"
#include "base/result.h"
#include "base/thread_pool.h"

namespace lm {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return Error{"not positive"};
  return x;
}

Status twice(int x, int* out) {
  LM_ASSIGN_OR_RETURN(int v, parse_positive(x));
  *out = 2 * v;
  return {};
}

TEST(Result, PropagatesErrors) {
  int out = 0;
  EXPECT_TRUE(twice(3, &out).ok());
  EXPECT_EQ(out, 6);
  Status s = twice(-1, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "not positive");
}

TEST(ByteReader, ReadsLittleEndianAndRefusesToOverrun) {
  const uint8_t bytes[] = {1, 0, 0, 0, 'h', 'i', 7};
  ByteReader r(bytes);
  EXPECT_EQ(*r.read<uint32_t>(), 1u);
  EXPECT_EQ(*r.read_string(2), "hi");
  auto too_far = r.read<uint32_t>();
  ASSERT_FALSE(too_far.ok());
  EXPECT_NE(too_far.error().message.find("truncated"), std::string::npos);
  EXPECT_FALSE(r.read_string(1ull << 60).ok());
  EXPECT_EQ(*r.read<uint8_t>(), 7);
}

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp32_to_fp16(f), h) << h;
  }
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(bf16_to_fp32(fp32_to_bf16(1.5f)), 1.5f);
  EXPECT_EQ(fp32_to_bf16(1.00390625f), 0x3f80);  // ties to even
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 7, 64, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(
        n,
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        },
        4);
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

}  // namespace
}  // namespace lm
