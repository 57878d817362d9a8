// The device KV pool's size from measured memory, as TGI's shard computes it after warm-up.
#include "runtime/device_kv_plan.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

DeviceKvSizing sizing(int64_t free_bytes, int64_t total_bytes, double fraction) {
  DeviceKvSizing s;
  s.memory = {free_bytes, total_bytes};
  s.memory_fraction = fraction;
  s.kv_bytes_per_block = 16 * 1024;  // 1 KiB per token
  s.block_size = 16;
  return s;
}

TEST(DeviceKvPlan, UsableMemoryWithholdsTheRestOfTheFractionOfTheWholeDevice) {
  // TGI: free - (1 - fraction) * total.
  EXPECT_EQ(usable_device_memory({60 * kGiB, 80 * kGiB}, 1.0), 60 * kGiB);
  EXPECT_EQ(usable_device_memory({60 * kGiB, 80 * kGiB}, 0.5), 20 * kGiB);
  EXPECT_EQ(usable_device_memory({30 * kGiB, 80 * kGiB}, 0.5), 0);  // never negative
}

TEST(DeviceKvPlan, FillsTheUsableMemoryTimesTheWiggleRoomInWholeBlocks) {
  auto plan = plan_device_kv(sizing(10 * kGiB, 80 * kGiB, 1.0));
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const int64_t usable = static_cast<int64_t>(10.0 * kGiB * 0.90);
  EXPECT_EQ(plan->usable_bytes, usable);
  // The whole pool, the reserved block 0 included, fits the usable bytes.
  EXPECT_EQ(plan->num_blocks, usable / (16 * 1024));
  EXPECT_LE(plan->num_blocks * 16 * 1024, plan->usable_bytes);
  EXPECT_EQ(plan->max_batch_total_tokens, (plan->num_blocks - 1) * 16);
  EXPECT_TRUE(plan->inferred);
}

TEST(DeviceKvPlan, AGivenMaxBatchTotalTokensIsHeldWhenItFits) {
  DeviceKvSizing s = sizing(10 * kGiB, 80 * kGiB, 1.0);
  s.max_batch_total_tokens = 1000;
  auto plan = plan_device_kv(s);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->num_blocks, 63 + 1);  // ceil(1000 / 16) blocks
  EXPECT_EQ(plan->max_batch_total_tokens, 63 * 16);
  EXPECT_FALSE(plan->inferred);
  s.max_batch_total_tokens = int64_t{1} << 40;
  auto too_many = plan_device_kv(s);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error().message.find("MAX_BATCH_TOTAL_TOKENS"), std::string::npos);
}

TEST(DeviceKvPlan, NoRoomForOneBlockIsAnErrorThatSaysWhatToChange) {
  // 20 KiB free, 18 KiB usable: the reserved block fits, no block beside it.
  auto plan = plan_device_kv(sizing(int64_t{20} * 1024, 80 * kGiB, 1.0));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("--max-batch-prefill-tokens"), std::string::npos);
  EXPECT_FALSE(plan_device_kv(sizing(10 * kGiB, 80 * kGiB, 0.0)).ok());
  EXPECT_FALSE(plan_device_kv(sizing(10 * kGiB, 80 * kGiB, 1.5)).ok());
}

TEST(DeviceKvPlan, WiggleRoomComesFromTheEnvironmentLikeTgis) {
  EXPECT_DOUBLE_EQ(*parse_wiggle_room(nullptr), 0.90);
  EXPECT_DOUBLE_EQ(*parse_wiggle_room("0.8"), 0.8);
  EXPECT_FALSE(parse_wiggle_room("0").ok());
  EXPECT_FALSE(parse_wiggle_room("1.2").ok());
  EXPECT_FALSE(parse_wiggle_room("lots").ok());
}

}  // namespace
}  // namespace lm
