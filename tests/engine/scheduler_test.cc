// Scheduler: exact batches and block ids for hand-built queues on 8 blocks of 4 tokens (FIFO
// admission, batch size, prefill chunking, block head-of-line blocking, joining a running batch,
// preemption by recompute, prefix cache hits and eviction, best_of sharing) and the finish rules.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <tuple>
#include <vector>

#include "scheduled_entries.h"

namespace lm {
namespace {

using testing_helpers::entries;
using testing_helpers::Entry;
using testing_helpers::request;
using testing_helpers::samples;
using testing_helpers::tables;

EngineConfig config(int64_t prefill_tokens, int64_t total_tokens, int64_t num_blocks = 64) {
  EngineConfig c;
  c.max_batch_prefill_tokens = prefill_tokens;
  c.max_batch_total_tokens = total_tokens;
  c.block_size = 4;
  c.num_blocks = num_blocks;
  return c;
}

TEST(Scheduler, AdmitsInFifoOrderWholePromptsThenOneTokenPerStep) {
  Scheduler scheduler(config(100, 1000));
  EXPECT_EQ(scheduler.add(request(3, 2, 10), nullptr), 0);
  EXPECT_EQ(scheduler.add(request(5, 2, 20), nullptr), 1);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 3, true}, {1, 0, 5, true}}));
  EXPECT_EQ(std::vector<int32_t>(batch.sequences[1].token_ids().begin(),
                                 batch.sequences[1].token_ids().end()),
            (std::vector<int32_t>{20, 21, 22, 23, 24}));
  EXPECT_EQ(scheduler.num_reserved_tokens(), 5 + 7);
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1}, {2, 3}}));

  StepOutput out = scheduler.update(batch, samples({7, 8}));
  ASSERT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.tokens[0].seq_id, 0);
  EXPECT_EQ(out.tokens[0].event.token.id, 7);
  EXPECT_FALSE(out.tokens[0].event.finish_reason);
  EXPECT_EQ(out.tokens[1].event.token.id, 8);
  EXPECT_TRUE(out.finished_seq_ids.empty());

  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 3, 1, true}, {1, 5, 1, true}}));
  EXPECT_EQ(batch.sequences[0].token_ids()[0], 7);  // the decode step feeds the sampled token
  EXPECT_EQ(batch.sequences[0].sequence->token_ids, (std::vector<int32_t>{10, 11, 12, 7}));
  // Position 3 still lies in seq 0's first block; seq 1's position 5 in its second.
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1}, {2, 3}}));

  out = scheduler.update(batch, samples({9, 10}));
  ASSERT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.tokens[0].event.finish_reason, FinishReason::kLength);
  EXPECT_EQ(out.tokens[1].event.finish_reason, FinishReason::kLength);
  EXPECT_EQ(out.finished_seq_ids, (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(scheduler.has_work());
  EXPECT_EQ(scheduler.num_reserved_tokens(), 0);
  EXPECT_EQ(scheduler.num_blocks_used(), 0);
  EXPECT_INVARIANTS(scheduler);
  EXPECT_TRUE(scheduler.schedule().empty());
}

TEST(Scheduler, PromptLogprobRequestsPrefillInBoundedChunks) {
  // A row of logits per prompt token: such a prompt takes at most kPromptLogprobChunk tokens a
  // step whatever the budget, while a plain prompt beside it takes the rest of the budget.
  const int64_t len = kPromptLogprobChunk + 100;
  Scheduler scheduler(config(4 * len, 8 * len, 1024));
  EngineRequest with_logprobs = request(len, 2);
  with_logprobs.prompt_logprobs = true;
  with_logprobs.use_prefix_cache = false;
  scheduler.add(with_logprobs, nullptr);
  scheduler.add(request(len, 2, 5000), nullptr);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch),
            (std::vector<Entry>{{0, 0, kPromptLogprobChunk, false}, {1, 0, len, true}}));
  scheduler.update(batch, samples({7}));
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch),
            (std::vector<Entry>{{0, kPromptLogprobChunk, 100, true}, {1, len, 1, true}}));
  scheduler.update(batch, samples({8, 9}));
  EXPECT_INVARIANTS(scheduler);
}

TEST(Scheduler, MaxBatchSizeBoundsRunningSequences) {
  EngineConfig c = config(100, 1000);
  c.max_batch_size = 2;
  Scheduler scheduler(c);
  scheduler.add(request(2, 1), nullptr);
  scheduler.add(request(2, 3), nullptr);
  scheduler.add(request(4, 3), nullptr);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 2, true}, {1, 0, 2, true}}));
  EXPECT_EQ(scheduler.num_running(), 2);
  EXPECT_EQ(scheduler.num_waiting(), 1);

  StepOutput out = scheduler.update(batch, samples({5, 6}));
  EXPECT_EQ(out.finished_seq_ids, (std::vector<int64_t>{0}));  // max_new_tokens = 1
  // The freed slot goes to the next waiting request, in the same step as the decode.
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{1, 2, 1, true}, {2, 0, 4, true}}));
}

// Implemented policy: a prompt longer than the prefill budget left is admitted with a chunk
// (TGI v3's chunked prefill); the chunk samples nothing, and decodes do not use the budget.
TEST(Scheduler, PrefillBudgetChunksLongPromptsAndStopsAdmission) {
  Scheduler scheduler(config(4, 1000));
  scheduler.add(request(10, 2), nullptr);
  scheduler.add(request(2, 2), nullptr);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 4, false}}));
  EXPECT_EQ(scheduler.num_waiting(), 1);  // the budget is spent: admission stops
  StepOutput out = scheduler.update(batch, samples({}));
  EXPECT_TRUE(out.tokens.empty());

  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 4, 4, false}}));
  (void)scheduler.update(batch, samples({}));
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 8, 2, true}, {1, 0, 2, true}}));
  out = scheduler.update(batch, samples({50, 51}));
  EXPECT_EQ(out.tokens.size(), 2u);
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 10, 1, true}, {1, 2, 1, true}}));
}

TEST(Scheduler, NewPromptGetsTheBudgetLeftAfterRunningSequences) {
  Scheduler scheduler(config(4, 1000));
  scheduler.add(request(3, 5), nullptr);
  scheduler.add(request(6, 5), nullptr);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 3, true}, {1, 0, 1, false}}));
  StepOutput out = scheduler.update(batch, samples({9}));
  ASSERT_EQ(out.tokens.size(), 1u);
  EXPECT_EQ(out.tokens[0].seq_id, 0);
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 3, 1, true}, {1, 1, 4, false}}));
  (void)scheduler.update(batch, samples({9}));
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 4, 1, true}, {1, 5, 1, true}}));
}

TEST(Scheduler, FreeBlocksBoundAdmissionWithoutSkippingAhead) {
  Scheduler scheduler(config(100, 1000, 8));   // blocks 1..7
  scheduler.add(request(11, 2, 10), nullptr);  // 3 blocks
  scheduler.add(request(11, 5, 30), nullptr);  // 3 blocks
  scheduler.add(request(5, 2, 50), nullptr);   // 2 blocks: only 1 left, waits
  scheduler.add(request(2, 2, 70), nullptr);   // 1 block would fit, but must not pass the head
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 11, true}, {1, 0, 11, true}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2, 3}, {4, 5, 6}}));
  EXPECT_EQ(scheduler.num_waiting(), 2);
  EXPECT_EQ(scheduler.num_blocks_used(), 6);
  (void)scheduler.update(batch, samples({1, 1}));
  EXPECT_INVARIANTS(scheduler);

  // Position 11 is the last slot of each third block: no new block, no admission.
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 11, 1, true}, {1, 11, 1, true}}));
  StepOutput out = scheduler.update(batch, samples({2, 2}));
  EXPECT_EQ(out.finished_seq_ids, (std::vector<int64_t>{0}));
  // Seq 0's three full blocks stay cached but evictable, released tail first.
  EXPECT_EQ(scheduler.num_blocks_used(), 3);
  EXPECT_EQ(scheduler.block_manager().num_cached_blocks(), 6);
  EXPECT_INVARIANTS(scheduler);

  // Seq 1 crosses into a fourth block (the never-used 7); the queue then evicts 3, 2, 1.
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch),
            (std::vector<Entry>{{1, 12, 1, true}, {2, 0, 5, true}, {3, 0, 2, true}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{4, 5, 6, 7}, {3, 2}, {1}}));
  EXPECT_EQ(scheduler.block_manager().num_cached_blocks(), 3);
  EXPECT_FALSE(scheduler.block_manager().can_allocate(1));
}

TEST(Scheduler, FitsEmptyBatchNeedsTheTokenBudgetAndTheWholeCache) {
  Scheduler scheduler(config(100, 40, 8));                    // 7 blocks = 28 slots
  EXPECT_TRUE(scheduler.fits_empty_batch(request(20, 9)));    // positions 0..27
  EXPECT_FALSE(scheduler.fits_empty_batch(request(20, 10)));  // position 28 needs an 8th block
  EXPECT_FALSE(scheduler.fits_empty_batch(request(0, 15)));
  EXPECT_FALSE(scheduler.fits_empty_batch(request(5, 0)));
  Scheduler roomy(config(100, 20, 64));
  EXPECT_TRUE(roomy.fits_empty_batch(request(5, 15)));
  EXPECT_FALSE(roomy.fits_empty_batch(request(5, 16)));  // over max_batch_total_tokens
}

TEST(Scheduler, NewRequestJoinsTheRunningBatchBetweenDecodeSteps) {
  Scheduler scheduler(config(100, 1000));
  scheduler.add(request(4, 10), nullptr);
  ScheduledBatch batch = scheduler.schedule();
  (void)scheduler.update(batch, samples({1}));
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 4, 1, true}}));
  (void)scheduler.update(batch, samples({2}));
  scheduler.add(request(3, 10), nullptr);
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 5, 1, true}, {1, 0, 3, true}}));
  EXPECT_EQ(batch.num_tokens(), 4);
  EXPECT_EQ(batch.num_samples(), 2);
}

TEST(Scheduler, LengthTakesPrecedenceOverEos) {
  EngineConfig c = config(100, 1000);
  c.eos_token_ids = {2, 3};
  Scheduler scheduler(c);
  scheduler.add(request(2, 1), nullptr);  // the EOS is also its last allowed token
  scheduler.add(request(2, 5), nullptr);
  EngineRequest ignoring = request(2, 5);
  ignoring.ignore_eos = true;
  scheduler.add(ignoring, nullptr);
  ScheduledBatch batch = scheduler.schedule();
  StepOutput out = scheduler.update(batch, samples({2, 3, 2}));
  ASSERT_EQ(out.tokens.size(), 3u);
  EXPECT_EQ(out.tokens[0].event.finish_reason, FinishReason::kLength);
  EXPECT_EQ(out.tokens[1].event.finish_reason, FinishReason::kEosToken);
  EXPECT_FALSE(out.tokens[2].event.finish_reason);
  EXPECT_EQ(out.finished_seq_ids, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(entries(scheduler.schedule()), (std::vector<Entry>{{2, 2, 1, true}}));
}

TEST(Scheduler, RemoveIfDropsWaitingAndRunningSequencesAndFreesTheirBlocks) {
  Scheduler scheduler(config(100, 1000, 8));
  scheduler.add(request(5, 5, 10), nullptr);   // 2 blocks
  scheduler.add(request(9, 10, 30), nullptr);  // 3 blocks
  scheduler.add(request(9, 10, 50), nullptr);  // 3 blocks: only 2 left, waits
  scheduler.add(request(1, 1, 70), nullptr);   // behind the blocked head
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 5, true}, {1, 0, 9, true}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2}, {3, 4, 5}}));
  (void)scheduler.update(batch, samples({1, 1}));

  std::vector<std::unique_ptr<Sequence>> removed =
      scheduler.remove_if([](const Sequence& seq) { return seq.id == 0 || seq.id == 3; });
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0]->id, 3);  // waiting ones come first
  EXPECT_EQ(removed[0]->status, SequenceStatus::kWaiting);
  EXPECT_EQ(removed[1]->id, 0);
  EXPECT_EQ(removed[1]->token_ids, (std::vector<int32_t>{10, 11, 12, 13, 14, 1}));
  EXPECT_TRUE(removed[1]->block_table.empty());
  EXPECT_EQ(scheduler.num_reserved_tokens(), 19);
  EXPECT_EQ(scheduler.num_blocks_used(), 3);
  EXPECT_INVARIANTS(scheduler);
  // Seq 0's partial block 2 went back to the front of the free list (most recently freed first,
  // before the never-used 6, 7); its full block 1 is cached.
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{1, 9, 1, true}, {2, 0, 9, true}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{3, 4, 5}, {2, 6, 7}}));
  EXPECT_EQ(scheduler.num_reserved_tokens(), 38);
  EXPECT_EQ(scheduler.num_blocks_used(), 6);
}

// Three sequences fill the 7 blocks; the oldest's decode then needs an eighth.
Scheduler preemption_scheduler(bool prefix_caching) {
  EngineConfig c = config(100, 1000, 8);
  c.prefix_caching = prefix_caching;
  Scheduler scheduler(c);
  scheduler.add(request(8, 2, 10), nullptr);    // 2 blocks
  scheduler.add(request(8, 10, 30), nullptr);   // 2 blocks
  scheduler.add(request(12, 10, 50), nullptr);  // 3 blocks
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch),
            (std::vector<Entry>{{0, 0, 8, true}, {1, 0, 8, true}, {2, 0, 12, true}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2}, {3, 4}, {5, 6, 7}}));
  (void)scheduler.update(batch, samples({1, 2, 3}));
  scheduler.add(request(1, 1, 70), nullptr);  // seq 3 arrives behind
  return scheduler;
}

TEST(Scheduler, PreemptsTheNewestWhichIsRecomputedFromTheFrontOfTheQueue) {
  Scheduler scheduler = preemption_scheduler(/*prefix_caching=*/false);
  // Seq 0 needs a third block: seq 2 (the newest) frees 7, 6, 5 and goes back to the queue's
  // front; seq 0 and seq 1 take 5 and 6 (most recently freed first). Nothing is admitted in a
  // step that preempted.
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 8, 1, true}, {1, 8, 1, true}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2, 5}, {3, 4, 6}}));
  EXPECT_EQ(scheduler.num_preemptions(), 1);
  EXPECT_EQ(scheduler.num_running(), 2);
  EXPECT_EQ(scheduler.num_waiting(), 2);
  EXPECT_EQ(scheduler.num_reserved_tokens(), 10 + 18);
  StepOutput out = scheduler.update(batch, samples({4, 5}));
  EXPECT_EQ(out.finished_seq_ids, (std::vector<int64_t>{0}));
  EXPECT_INVARIANTS(scheduler);

  // Seq 2 comes back before seq 3 and recomputes its prompt and its generated token from 0; it
  // samples its second token at the end. Seq 3 then finds no block.
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{1, 9, 1, true}, {2, 0, 13, true}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{3, 4, 6}, {1, 2, 5, 7}}));
  EXPECT_EQ(batch.sequences[1].token_ids().back(), 3);
  EXPECT_EQ(scheduler.num_waiting(), 1);
  out = scheduler.update(batch, samples({6, 7}));
  ASSERT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.tokens[1].seq_id, 2);
  EXPECT_EQ(out.tokens[1].event.token.id, 7);
  EXPECT_EQ(batch.sequences[1].sequence->num_generated_tokens(), 2);
  EXPECT_INVARIANTS(scheduler);
}

TEST(Scheduler, APreemptedSequenceReusesItsOwnCachedPrefix) {
  Scheduler scheduler = preemption_scheduler(/*prefix_caching=*/true);
  // Every full block is cached. Seq 2's blocks are released tail first, so its last block (7)
  // and then its middle one (6) are evicted, and its first (5) survives.
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2, 7}, {3, 4, 6}}));
  EXPECT_EQ(scheduler.num_preemptions(), 1);
  (void)scheduler.update(batch, samples({4, 5}));
  EXPECT_INVARIANTS(scheduler);

  // Seq 2 restarts after its cached first block: it reuses 5 and takes 7 (free), 2 and 1
  // (seq 0's cached prompt, evicted least recently used first).
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{1, 9, 1, true}, {2, 4, 9, true}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{3, 4, 6}, {5, 7, 2, 1}}));
  EXPECT_EQ(scheduler.prefix_cache_query_tokens(), 8 + 8 + 12 + 13);
  EXPECT_EQ(scheduler.prefix_cache_hit_tokens(), 4);
  (void)scheduler.update(batch, samples({6, 7}));
  EXPECT_INVARIANTS(scheduler);
}

TEST(Scheduler, PrefixCacheHitsStartAfterTheCachedBlocks) {
  Scheduler scheduler(config(100, 1000, 8));
  scheduler.add(request(10, 1, 100), nullptr);  // 100..109
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2, 3}}));
  (void)scheduler.update(batch, samples({1}));  // finished: full blocks 1 and 2 stay cached
  EXPECT_EQ(scheduler.num_blocks_used(), 0);
  EXPECT_EQ(scheduler.block_manager().num_cached_blocks(), 2);

  EngineRequest longer = request(8, 1, 100);
  longer.prompt_ids.insert(longer.prompt_ids.end(), {200, 201, 202});
  scheduler.add(longer, nullptr);                // seq 1: blocks 1 and 2, then 3 new tokens
  scheduler.add(request(8, 1, 100), nullptr);    // seq 2: all cached, yet the last block is
                                                 // recomputed to have logits to sample
  EngineRequest opted_out = request(8, 1, 100);  // seq 3: computes everything
  opted_out.use_prefix_cache = false;
  scheduler.add(opted_out, nullptr);
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch),
            (std::vector<Entry>{{1, 8, 3, true}, {2, 4, 4, true}, {3, 0, 8, true}}));
  // Seq 0's freed partial block 3 is handed out again first.
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2, 3}, {1, 4}, {5, 6}}));
  EXPECT_EQ(std::vector<int32_t>(batch.sequences[0].token_ids().begin(),
                                 batch.sequences[0].token_ids().end()),
            (std::vector<int32_t>{200, 201, 202}));
  EXPECT_EQ(scheduler.block_manager().ref_count(1), 2);
  EXPECT_EQ(scheduler.block_manager().ref_count(2), 1);
  EXPECT_EQ(scheduler.prefix_cache_query_tokens(), 10 + 11 + 8);
  EXPECT_EQ(scheduler.prefix_cache_hit_tokens(), 8 + 4);
  (void)scheduler.update(batch, samples({1, 2, 3}));
  EXPECT_INVARIANTS(scheduler);
  EXPECT_EQ(scheduler.num_blocks_used(), 0);
  EXPECT_EQ(scheduler.block_manager().num_cached_blocks(), 2);  // duplicates are not cached
}

// best_of candidates are identical requests. NOTE: the second waits one step for the first's
// prompt blocks to be computed and cached rather than computing the same K/V in the same batch.
TEST(Scheduler, IdenticalPromptsShareTheFirstOnesBlocksFromTheNextStep) {
  Scheduler scheduler(config(100, 1000, 8));
  scheduler.add(request(12, 3, 100), nullptr);
  scheduler.add(request(12, 3, 100), nullptr);
  scheduler.add(request(2, 3, 10), nullptr);  // strict FIFO: waits behind the deferred one
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 12, true}}));
  EXPECT_EQ(scheduler.num_waiting(), 2);
  (void)scheduler.update(batch, samples({1}));

  // Seq 1 reuses blocks 1 and 2 and computes its last 4 prompt tokens (its last token must be
  // computed, and sharing is by whole blocks).
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch),
            (std::vector<Entry>{{0, 12, 1, true}, {1, 8, 4, true}, {2, 0, 2, true}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2, 3, 4}, {1, 2, 5}, {6}}));
  EXPECT_EQ(scheduler.prefix_cache_hit_tokens(), 8);
  (void)scheduler.update(batch, samples({1, 2, 3}));
  EXPECT_INVARIANTS(scheduler);
}

TEST(Scheduler, ACandidateOptingOutOfTheCacheIsAdmittedAtOnce) {
  Scheduler scheduler(config(100, 1000, 8));
  scheduler.add(request(12, 3, 100), nullptr);
  EngineRequest opted_out = request(12, 3, 100);
  opted_out.use_prefix_cache = false;
  scheduler.add(opted_out, nullptr);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 12, true}, {1, 0, 12, true}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2, 3}, {4, 5, 6}}));
  (void)scheduler.update(batch, samples({1, 2}));
  EXPECT_INVARIANTS(scheduler);
}

}  // namespace
}  // namespace lm
