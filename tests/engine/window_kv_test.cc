// Window-bounded K/V (EngineConfig::kv_window_tokens): on 8 blocks of 4 tokens with a window of
// 6, the exact blocks released as sequences advance (placeholders left in their tables), the
// admission of sequences too long for the cache without it, prompt chunks shrunk to the free
// blocks, prefix-cache hits that take only the blocks inside the window, and preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "engine/kv_window.h"
#include "engine/scheduler.h"
#include "scheduled_entries.h"

namespace lm {
namespace {

using testing_helpers::entries;
using testing_helpers::Entry;
using testing_helpers::request;
using testing_helpers::tables;
using Tables = std::vector<std::vector<int32_t>>;

constexpr int64_t kWindow = 6;  // position p reads [p - 5, p]

EngineConfig window_config(int64_t prefill_tokens, bool prefix_caching = false) {
  EngineConfig c;
  c.max_batch_prefill_tokens = prefill_tokens;
  c.max_batch_total_tokens = 28;
  c.block_size = 4;
  c.num_blocks = 8;  // blocks 1..7
  c.prefix_caching = prefix_caching;
  c.kv_window_tokens = kWindow;
  return c;
}

std::vector<SampleResult> samples_for(const ScheduledBatch& batch, int32_t id = 1) {
  SampleResult r;
  r.id = id;
  return std::vector<SampleResult>(static_cast<size_t>(batch.num_samples()), r);
}

TEST(KvWindow, BlocksBeforeTheWindowOfTheNextPosition) {
  // Position 9 reads [4, 9]: block 0 (positions 0-3) is no longer read, block 1 still is.
  EXPECT_EQ(num_blocks_before_window(kWindow, 4, 8), 0);
  EXPECT_EQ(num_blocks_before_window(kWindow, 4, 9), 1);
  EXPECT_EQ(num_blocks_before_window(kWindow, 4, 12), 1);
  EXPECT_EQ(num_blocks_before_window(kWindow, 4, 13), 2);
  EXPECT_EQ(num_blocks_before_window(0, 4, 1000), 0);  // no window: every block stays
  // Six positions touch at most three blocks of 4 (e.g. 3..8), four at most two (1..4).
  EXPECT_EQ(max_blocks_spanned(6, 4), 3);
  EXPECT_EQ(max_blocks_spanned(4, 4), 2);
  EXPECT_EQ(max_blocks_spanned(1, 4), 1);
}

TEST(WindowScheduler, ReleasesEachBlockOnceItLiesWhollyBeforeTheWindow) {
  Scheduler scheduler(window_config(100));
  scheduler.add(request(5, 20), nullptr);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(tables(batch), (Tables{{1, 2}}));
  (void)scheduler.update(batch, samples_for(batch));  // next position 5 reads [0, 5]
  // Positions 5..7 fit block 2; position 8 takes block 3.
  for (int i = 0; i < 3; ++i) (void)scheduler.update(scheduler.schedule(), samples_for(batch));
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 8, 1, true}}));
  EXPECT_EQ(tables(batch), (Tables{{1, 2, 3}}));
  EXPECT_EQ(scheduler.num_blocks_used(), 3);
  (void)scheduler.update(batch, samples_for(batch));
  // Next position 9 reads [4, 9]: block 1 goes back to the pool, a placeholder stays.
  EXPECT_EQ(scheduler.num_blocks_used(), 2);
  EXPECT_INVARIANTS(scheduler);
  for (int i = 0; i < 3; ++i) (void)scheduler.update(scheduler.schedule(), samples_for(batch));
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 12, 1, true}}));
  // Position 12 takes block 1 again (most recently freed first: its pages are resident).
  EXPECT_EQ(tables(batch), (Tables{{0, 2, 3, 1}}));
  EXPECT_EQ(batch.sequences[0].num_placeholder_blocks, 1);
  (void)scheduler.update(batch, samples_for(batch));
  EXPECT_EQ(scheduler.num_blocks_used(), 2);  // next position 13 reads [8, 13]: block 2 goes
  EXPECT_INVARIANTS(scheduler);
  batch = scheduler.schedule();
  EXPECT_EQ(tables(batch), (Tables{{0, 0, 3, 1}}));
  EXPECT_EQ(batch.sequences[0].num_placeholder_blocks, 2);
}

TEST(WindowScheduler, ChunkedPrefillReleasesBlocksBetweenChunks) {
  Scheduler scheduler(window_config(8));
  scheduler.add(request(20, 2), nullptr);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 8, false}}));
  EXPECT_EQ(tables(batch), (Tables{{1, 2}}));
  (void)scheduler.update(batch, samples_for(batch));  // next position 8 reads [3, 8]: none goes
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 8, 8, false}}));
  EXPECT_EQ(tables(batch), (Tables{{1, 2, 3, 4}}));
  (void)scheduler.update(batch, samples_for(batch));  // position 16 reads [11, 16]: 1 and 2 go
  EXPECT_EQ(scheduler.num_blocks_used(), 2);
  EXPECT_INVARIANTS(scheduler);
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 16, 4, true}}));
  EXPECT_EQ(tables(batch), (Tables{{0, 0, 3, 4, 2}}));  // 2, freed last, first
  EXPECT_EQ(batch.sequences[0].num_placeholder_blocks, 2);
  (void)scheduler.update(batch, samples_for(batch));  // position 20 reads [15, 20]: 3 goes
  EXPECT_EQ(scheduler.num_blocks_used(), 2);
  EXPECT_INVARIANTS(scheduler);
}

// Drives the scheduler to the end, feeding token 1, checking the invariants after every step;
// returns the most blocks held at once and each sequence's generated tokens.
struct RunResult {
  int64_t max_blocks_used = 0;
  std::map<int64_t, int64_t> num_generated;
};
RunResult run_to_end(Scheduler& scheduler) {
  RunResult result;
  for (int step = 0; scheduler.has_work() && step < 1000; ++step) {
    ScheduledBatch batch = scheduler.schedule();
    result.max_blocks_used = std::max(result.max_blocks_used, scheduler.num_blocks_used());
    StepOutput out = scheduler.update(batch, samples_for(batch));
    for (const TokenOutput& t : out.tokens) ++result.num_generated[t.seq_id];
    EXPECT_INVARIANTS(scheduler);
  }
  EXPECT_FALSE(scheduler.has_work());
  EXPECT_EQ(scheduler.num_blocks_used(), 0);
  return result;
}

TEST(WindowScheduler, LongSequenceTheCacheCannotHoldIsAdmittedAndFinishes) {
  // 10 + 30 tokens need 10 blocks; the cache has 7.
  EngineConfig config = window_config(100);
  EXPECT_TRUE(check_fits_empty_batch(config, request(10, 30)).ok());
  EngineConfig unwindowed = config;
  unwindowed.kv_window_tokens = 0;
  EXPECT_FALSE(check_fits_empty_batch(unwindowed, request(10, 30)).ok());

  Scheduler scheduler(config);
  scheduler.add(request(10, 30), nullptr);
  const RunResult result = run_to_end(scheduler);
  EXPECT_EQ(result.num_generated.at(0), 30);
  EXPECT_EQ(result.max_blocks_used, 3);  // max_blocks_spanned(6, 4)
  EXPECT_EQ(scheduler.num_preemptions(), 0);
}

TEST(WindowScheduler, PromptChunkShrinksToTheFreeBlocks) {
  Scheduler scheduler(window_config(100));
  scheduler.add(request(3, 10), nullptr);
  scheduler.add(request(30, 2, 200), nullptr);  // 30 prompt tokens: 8 blocks, the cache has 7
  ScheduledBatch batch = scheduler.schedule();
  // Seq 0 holds block 1; seq 1 gets the other six blocks' 24 tokens of its prompt.
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 3, true}, {1, 0, 24, false}}));
  EXPECT_EQ(tables(batch), (Tables{{1}, {2, 3, 4, 5, 6, 7}}));
  (void)scheduler.update(batch, samples_for(batch));
  // Next position 24 reads [19, 24]: blocks 2..5 go back, the rest of the prompt fits.
  EXPECT_EQ(scheduler.num_blocks_used(), 3);
  EXPECT_INVARIANTS(scheduler);
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 3, 1, true}, {1, 24, 6, true}}));
  EXPECT_EQ(tables(batch), (Tables{{1}, {0, 0, 0, 0, 6, 7, 5, 4}}));  // freed last, first
  (void)scheduler.update(batch, samples_for(batch));
  const RunResult result = run_to_end(scheduler);
  EXPECT_EQ(result.num_generated.at(0), 8);  // of 10: two came before
  EXPECT_EQ(result.num_generated.at(1), 1);  // of 2
  EXPECT_EQ(scheduler.num_preemptions(), 0);
}

TEST(WindowScheduler, PrefixHitTakesOnlyTheCachedBlocksInsideTheWindow) {
  Scheduler scheduler(window_config(100, /*prefix_caching=*/true));
  scheduler.add(request(16, 1), nullptr);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(tables(batch), (Tables{{1, 2, 3, 4}}));
  (void)scheduler.update(batch, samples_for(batch));
  // Released before the window (1, 2) then finished (4, 3): all four cached, none held.
  EXPECT_EQ(scheduler.num_blocks_used(), 0);
  EXPECT_EQ(scheduler.block_manager().num_cached_blocks(), 4);

  EngineRequest longer = request(17, 2);  // the same 16 tokens and one more
  scheduler.add(longer, nullptr);
  batch = scheduler.schedule();
  // Position 16 reads [11, 16]: of the cached prefix only blocks 3 and 4 are taken.
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{1, 16, 1, true}}));
  EXPECT_EQ(tables(batch), (Tables{{0, 0, 3, 4, 5}}));
  EXPECT_EQ(batch.sequences[0].num_placeholder_blocks, 2);
  EXPECT_EQ(scheduler.prefix_cache_hit_tokens(), 16);
  EXPECT_EQ(scheduler.num_blocks_used(), 3);
  EXPECT_TRUE(scheduler.block_manager().is_evictable(1));
  EXPECT_TRUE(scheduler.block_manager().is_evictable(2));
  (void)scheduler.update(batch, samples_for(batch));
  EXPECT_INVARIANTS(scheduler);
  const RunResult result = run_to_end(scheduler);
  EXPECT_EQ(result.num_generated.at(1), 1);  // of 2
}

TEST(WindowScheduler, PreemptedSequencesRecomputeAndFinish) {
  // Three sequences of 3 + 20 tokens each hold up to 3 blocks: 9 > 7, so the newest is
  // preempted when the others grow, recomputed later, and every one finishes.
  EngineConfig config = window_config(100, /*prefix_caching=*/true);
  Scheduler scheduler(config);
  for (int32_t i = 0; i < 3; ++i) scheduler.add(request(3, 20, 100 * (i + 1)), nullptr);
  const RunResult result = run_to_end(scheduler);
  for (int64_t id = 0; id < 3; ++id) EXPECT_EQ(result.num_generated.at(id), 20) << id;
  EXPECT_GT(scheduler.num_preemptions(), 0);
  EXPECT_LE(result.max_blocks_used, 7);
}

}  // namespace
}  // namespace lm
