// BlockManager on 8 blocks of 4 tokens: allocation order, reference counts, prefix cache hits with
// exact block ids, least-recently-used eviction, and the invariants after every change.
#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace lm {
namespace {

#define EXPECT_INVARIANTS(bm)                           \
  do {                                                  \
    Status status = (bm).check_invariants();            \
    EXPECT_TRUE(status.ok()) << status.error().message; \
  } while (0)

const std::vector<int32_t> kA = {1, 2, 3, 4};
const std::vector<int32_t> kB = {5, 6, 7, 8};

uint64_t hash_of(const std::vector<int32_t>& tokens, uint64_t parent = BlockManager::kRootHash) {
  return BlockManager::hash_block(parent, tokens);
}

TEST(BlockManager, HandsOutBlocksOneUpInOrderNeverBlockZero) {
  BlockManager bm(8, 4);
  EXPECT_EQ(bm.num_usable_blocks(), 7);
  EXPECT_EQ(bm.num_free_blocks(), 7);
  std::vector<int32_t> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(bm.allocate());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(bm.can_allocate(1));
  EXPECT_EQ(bm.num_used_blocks(), 7);
  EXPECT_INVARIANTS(bm);
  bm.release(3);
  bm.release(1);
  EXPECT_TRUE(bm.can_allocate(2));
  EXPECT_FALSE(bm.can_allocate(3));
  // Freed blocks are handed out again most recently freed first (their pages are resident).
  EXPECT_EQ(bm.allocate(), 1);
  EXPECT_EQ(bm.allocate(), 3);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, FreedBlocksComeBackBeforeNeverWrittenOnes) {
  BlockManager bm(8, 4);
  for (int i = 0; i < 3; ++i) bm.allocate();  // 1, 2, 3
  EXPECT_EQ(bm.num_resident_blocks(), 3);
  bm.release(2);
  // Block 2 again, not block 4: resident memory stays at the working set.
  EXPECT_EQ(bm.allocate(), 2);
  EXPECT_EQ(bm.allocate(), 4);
  EXPECT_EQ(bm.num_resident_blocks(), 4);
  // Released blocks stay resident (their pages are reused as they are).
  bm.release(4);
  bm.release(1);
  EXPECT_EQ(bm.num_resident_blocks(), 4);
  EXPECT_TRUE(bm.take_returned_blocks().empty());
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, UnusedCachedBlocksPastTheBudgetAreDroppedAndReturned) {
  BlockManager bm(8, 4, /*max_evictable_blocks=*/2);
  const std::vector<std::vector<int32_t>> prompts = {{1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}};
  std::vector<int32_t> ids;
  for (const auto& tokens : prompts) {
    ids.push_back(bm.allocate());
    ASSERT_TRUE(bm.cache(ids.back(), hash_of(tokens), BlockManager::kRootHash, tokens));
  }
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3}));
  bm.release(1);
  bm.release(2);
  EXPECT_EQ(bm.num_cached_blocks(), 3);  // two unused, block 3 still referenced
  EXPECT_TRUE(bm.take_returned_blocks().empty());
  // The third unused cached block is one past the budget: the least recently used (block 1)
  // leaves the cache and its memory is to be handed back.
  bm.release(3);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  EXPECT_FALSE(bm.lookup(hash_of(prompts[0]), BlockManager::kRootHash, prompts[0]));
  EXPECT_EQ(bm.lookup(hash_of(prompts[1]), BlockManager::kRootHash, prompts[1]), 2);
  EXPECT_EQ(bm.num_resident_blocks(), 2);
  EXPECT_EQ(bm.num_free_blocks(), 7);
  EXPECT_INVARIANTS(bm);
  EXPECT_EQ(bm.take_returned_blocks(), (std::vector<int32_t>{1}));
  EXPECT_TRUE(bm.take_returned_blocks().empty());  // listed once
  // A returned block is handed out after the never-written ones, and is resident again then.
  std::vector<int32_t> order;
  for (int i = 0; i < 5; ++i) order.push_back(bm.allocate());
  EXPECT_EQ(order, (std::vector<int32_t>{4, 5, 6, 7, 1}));
  EXPECT_EQ(bm.num_resident_blocks(), 7);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, AReturnedBlockAllocatedAgainIsNotHandedBack) {
  // Budget 0: a cached block is dropped as soon as nobody uses it.
  BlockManager bm(3, 4, /*max_evictable_blocks=*/0);
  const int32_t id = bm.allocate();
  ASSERT_TRUE(bm.cache(id, hash_of(kA), BlockManager::kRootHash, kA));
  EXPECT_EQ(bm.allocate(), 2);
  bm.release(id);
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  EXPECT_EQ(bm.num_resident_blocks(), 1);
  // Written again before its memory was handed back: handing it back now would lose that.
  EXPECT_EQ(bm.allocate(), id);
  EXPECT_TRUE(bm.take_returned_blocks().empty());
  EXPECT_EQ(bm.num_resident_blocks(), 2);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, ReferenceCountsKeepSharedBlocksUntilTheLastRelease) {
  BlockManager bm(8, 4);
  const int32_t id = bm.allocate();
  ASSERT_TRUE(bm.cache(id, hash_of(kA), BlockManager::kRootHash, kA));
  bm.acquire(id);
  EXPECT_EQ(bm.ref_count(id), 2);
  bm.release(id);
  EXPECT_EQ(bm.ref_count(id), 1);
  EXPECT_EQ(bm.num_free_blocks(), 6);
  bm.release(id);
  EXPECT_EQ(bm.ref_count(id), 0);
  // Unreferenced but cached: evictable, so it counts as free and can still be looked up.
  EXPECT_TRUE(bm.is_evictable(id));
  EXPECT_EQ(bm.num_free_blocks(), 7);
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(bm.lookup(hash_of(kA), BlockManager::kRootHash, kA), id);
  bm.acquire(id);  // revived
  EXPECT_FALSE(bm.is_evictable(id));
  EXPECT_EQ(bm.num_free_blocks(), 6);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, PrefixLookupFollowsTheHashChain) {
  BlockManager bm(8, 4);
  const int32_t first = bm.allocate();   // 1
  const int32_t second = bm.allocate();  // 2
  const uint64_t h1 = hash_of(kA);
  const uint64_t h2 = hash_of(kB, h1);
  ASSERT_TRUE(bm.cache(first, h1, BlockManager::kRootHash, kA));
  ASSERT_TRUE(bm.cache(second, h2, h1, kB));
  EXPECT_EQ(bm.lookup(h1, BlockManager::kRootHash, kA), 1);
  EXPECT_EQ(bm.lookup(h2, h1, kB), 2);
  // The same tokens after another parent (or first) are a different block.
  EXPECT_EQ(bm.lookup(hash_of(kB), BlockManager::kRootHash, kB), std::nullopt);
  EXPECT_NE(hash_of(kB), h2);
  // A colliding key with other tokens is a miss, not a wrong hit.
  EXPECT_EQ(bm.lookup(h2, h1, kA), std::nullopt);
  // A second block with a key already cached stays uncached (the first keeps the key).
  const int32_t dup = bm.allocate();
  EXPECT_FALSE(bm.cache(dup, h1, BlockManager::kRootHash, kA));
  bm.release(dup);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  EXPECT_EQ(bm.lookup(h1, BlockManager::kRootHash, kA), 1);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, EvictsLeastRecentlyReleasedCachedBlocksAfterTheFreeOnes) {
  BlockManager bm(8, 4);
  std::vector<int32_t> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(bm.allocate());
  // Blocks 1..3 cached, released in the order 2, 1, 3; blocks 4..7 stay referenced.
  const std::vector<std::vector<int32_t>> tokens = {
      {10, 11, 12, 13}, {20, 21, 22, 23}, {30, 31, 32, 33}};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(bm.cache(ids[static_cast<size_t>(i)], hash_of(tokens[static_cast<size_t>(i)]),
                         BlockManager::kRootHash, tokens[static_cast<size_t>(i)]));
  }
  bm.release(2);
  bm.release(1);
  bm.release(3);
  bm.release(7);  // uncached: plain free, handed out before any cached block is evicted
  EXPECT_EQ(bm.num_free_blocks(), 4);
  EXPECT_EQ(bm.num_cached_blocks(), 3);
  EXPECT_EQ(bm.allocate(), 7);
  EXPECT_EQ(bm.num_cached_blocks(), 3);
  EXPECT_EQ(bm.allocate(), 2);  // least recently released
  EXPECT_EQ(bm.lookup(hash_of(tokens[1]), BlockManager::kRootHash, tokens[1]), std::nullopt);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  EXPECT_EQ(bm.ref_count(2), 1);
  // Reusing block 1 from the cache moves it out of the LRU: block 3 is next to go.
  bm.acquire(1);
  EXPECT_EQ(bm.allocate(), 3);
  EXPECT_FALSE(bm.can_allocate(1));
  bm.release(1);  // back to the LRU as its most recent entry
  EXPECT_EQ(bm.lookup(hash_of(tokens[0]), BlockManager::kRootHash, tokens[0]), 1);
  EXPECT_EQ(bm.allocate(), 1);
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManager, CheckInvariantsHoldsThroughAMixOfOperations) {
  BlockManager bm(8, 4);
  EXPECT_INVARIANTS(bm);
  std::vector<int32_t> held;
  for (int round = 0; round < 20; ++round) {
    while (bm.can_allocate(1) && held.size() < 5) held.push_back(bm.allocate());
    const int32_t id = held[static_cast<size_t>(round) % held.size()];
    const std::vector<int32_t> tokens = {round, round, round, round};
    if (bm.ref_count(id) == 1 && !bm.is_evictable(id) &&
        bm.lookup(hash_of(tokens), BlockManager::kRootHash, tokens) == std::nullopt)
      (void)bm.cache(id, hash_of(tokens), BlockManager::kRootHash, tokens);
    bm.release(id);
    held.erase(std::find(held.begin(), held.end(), id));
    EXPECT_INVARIANTS(bm);
  }
  for (int32_t id : held) bm.release(id);
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_INVARIANTS(bm);
}

// Speculation's rollback: a sequence's tail block that held only rejected proposals (never
// cached) is released while its cached prefix stays referenced; it is free at once, reused first,
// and nothing is dropped from the cache or handed back, even with no room for unused entries.
TEST(BlockManager, ReleasingAnUncachedTailLeavesTheCachedPrefixAlone) {
  BlockManager bm(8, 4, /*max_evictable_blocks=*/0);
  const int32_t a = bm.allocate();
  const int32_t tail = bm.allocate();
  ASSERT_TRUE(bm.cache(a, hash_of(kA), BlockManager::kRootHash, kA));
  bm.release(tail);
  EXPECT_EQ(bm.ref_count(a), 1);
  EXPECT_EQ(bm.num_cached_blocks(), 1);
  EXPECT_EQ(bm.num_used_blocks(), 1);
  EXPECT_TRUE(bm.take_returned_blocks().empty());
  EXPECT_INVARIANTS(bm);
  EXPECT_EQ(bm.allocate(), tail);
  EXPECT_INVARIANTS(bm);
}

}  // namespace
}  // namespace lm
