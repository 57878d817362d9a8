// Scheduler with speculation (n-gram proposals) on blocks of 4 tokens: exact batches, proposals
// and block ids; accepted proposals kept (and cached), rejected ones rolled back with the blocks
// that held only them; stop rules applied per token; proposals bounded by max_new_tokens and by
// the free blocks, never preempting; a costly-to-resume proposer's catch-up only where it pays.
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "engine/scheduler.h"
#include "engine/step_stats.h"
#include "scheduled_entries.h"

namespace lm {
namespace {

using testing_helpers::entries;
using testing_helpers::Entry;
using testing_helpers::samples;
using testing_helpers::tables;
using Ids = std::vector<int32_t>;

EngineConfig config(int64_t num_blocks = 64, int64_t speculate = 3) {
  EngineConfig c;
  c.max_batch_prefill_tokens = 100;
  c.max_batch_total_tokens = 1000;
  c.block_size = 4;
  c.num_blocks = num_blocks;
  c.speculate = speculate;
  return c;
}

EngineRequest request(Ids prompt, int64_t max_new_tokens) {
  EngineRequest r;
  r.prompt_ids = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  return r;
}

std::vector<Ids> proposals(const ScheduledBatch& batch) {
  std::vector<Ids> out;
  for (const ScheduledSequence& s : batch.sequences) out.push_back(s.proposed_ids);
  return out;
}

Ids ids_of(const StepOutput& out) {
  Ids ids;
  for (const TokenOutput& t : out.tokens) ids.push_back(t.event.token.id);
  return ids;
}

// With adaptive_speculation the governor decides per step: measured slower with proposals, the
// step proposes nothing (but for its probes); measured faster, it proposes as before.
TEST(SchedulerSpeculation, AdaptiveSpeculationProposesOnlyWhereItPays) {
  EngineConfig c = config();
  c.adaptive_speculation = true;
  for (const bool pays : {false, true}) {
    SCOPED_TRACE(pays ? "pays" : "costs");
    Scheduler scheduler(c);
    SpeculationGovernor& g = scheduler.speculation_governor();
    for (int i = 0; i < SpeculationGovernor::kMinSamples; ++i) {
      g.observe(true, 1, 5, pays ? 0.03 : 0.06);  // 6 or 12 ms a token with proposals
      g.observe(false, 1, 1, 0.01);               // 10 without
    }
    scheduler.add(request({5, 6, 7, 5, 6}, 10), nullptr);
    scheduler.update(scheduler.schedule(), samples({7}));
    const ScheduledBatch batch = scheduler.schedule();
    EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 5, 1, true}}));
    EXPECT_EQ(proposals(batch), (std::vector<Ids>{pays ? Ids{5, 6, 7} : Ids{}}));
  }
}

// A proposer costly to resume, as a draft model is: it would catch up on every id it has not
// seen but the last, and proposes 1 2 3.
class CatchingUpProposer final : public Proposer {
 public:
  void propose(std::span<ProposalSlot> slots) override {
    for (ProposalSlot& slot : slots) {
      seen_ = slot.token_ids.size();
      slot.proposed = {1, 2, 3};
      slot.proposed.resize(static_cast<size_t>(std::min<int64_t>(3, slot.max_tokens)));
    }
  }
  const char* kind() const override { return "catching up"; }
  bool cheap_to_resume() const override { return false; }
  int64_t catch_up_rows(int64_t, std::span<const int32_t> token_ids) const override {
    return static_cast<int64_t>(token_ids.size()) - 1 - static_cast<int64_t>(seen_);
  }

 private:
  size_t seen_ = 0;
};

// A sequence whose catch-up its tokens left would not pay back (twice) proposes nothing:
// measured 1 ms a caught-up row and 4 ms a token saved, a 40-token prompt and its first token
// (41 ids: 40 rows to catch up, all but the last) pays with 29 tokens left (116 ms against
// 2 x 40) and not with 19 (76 ms).
TEST(SchedulerSpeculation, ACatchUpTheAnswerWouldNotPayBackIsLeftOut) {
  EngineConfig c = config();
  c.adaptive_speculation = true;
  for (const int64_t max_new_tokens : {20, 30}) {
    SCOPED_TRACE(max_new_tokens);
    Scheduler scheduler(c, std::make_unique<CatchingUpProposer>());
    SpeculationGovernor& g = scheduler.speculation_governor();
    // Speculation first, then plain decoding: 6 ms a token with proposals, 10 without.
    for (int i = 0; i < 2 * SpeculationGovernor::kMinSamples; ++i) {
      const bool proposed = g.should_propose(1);
      g.observe(proposed, 1, proposed ? 5 : 1, proposed ? 0.03 : 0.01);
    }
    g.observe_catch_up(100, 0.1);
    Ids prompt(40);
    for (int32_t i = 0; i < 40; ++i) prompt[static_cast<size_t>(i)] = 10 + i;
    scheduler.add(request(prompt, max_new_tokens), nullptr);
    scheduler.update(scheduler.schedule(), samples({7}));
    const ScheduledBatch batch = scheduler.schedule();
    EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 40, 1, true}}));
    EXPECT_EQ(proposals(batch), (std::vector<Ids>{max_new_tokens == 30 ? Ids{1, 2, 3} : Ids{}}));
  }
}

TEST(SchedulerSpeculation, AcceptedProposalsAreKeptAndRejectedOnesRolledBack) {
  Scheduler scheduler(config());
  scheduler.add(request({5, 6, 7, 5, 6}, 10), nullptr);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 5, true}}));
  EXPECT_EQ(proposals(batch), (std::vector<Ids>{{}}));  // a prompt proposes nothing
  scheduler.update(batch, samples({7}));

  // 5 6 7 5 6 7: the suffix 5 6 7 recurs at 0, so 5 6 7 is proposed after it, at positions 6-8.
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 5, 1, true}}));
  EXPECT_EQ(proposals(batch), (std::vector<Ids>{{5, 6, 7}}));
  EXPECT_EQ(batch.num_tokens(), 4);
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2, 3}}));
  // The step's stats: one decode row; the proposals push rows as a prompt chunk does.
  const StepStats stats = count_step(batch);
  EXPECT_EQ(stats.num_decode_tokens, 1);
  EXPECT_EQ(stats.num_prefill_tokens, 0);
  EXPECT_EQ(stats.num_proposed_tokens, 3);
  EXPECT_EQ(stats.shape().num_prefill_tokens, 3);
  EXPECT_EQ(stats.num_attended_tokens, 6 + 7 + 8 + 9);
  EXPECT_STREQ(stats.kind(), "decode");
  // The model chose 5 at the newest token's row (= proposal 0), 6 at proposal 0's (= proposal
  // 1) and 9 at proposal 1's: 5 and 6 are accepted, 9 corrects proposal 2.
  StepOutput out = scheduler.update(batch, samples({5, 6, 9}));
  EXPECT_EQ(ids_of(out), (Ids{5, 6, 9}));
  EXPECT_EQ(out.num_accepted, (std::vector<int64_t>{2}));
  EXPECT_EQ(out.num_proposed_tokens, 3);
  EXPECT_TRUE(out.finished_seq_ids.empty());
  EXPECT_EQ(scheduler.num_proposed_tokens(), 3);
  EXPECT_EQ(scheduler.num_accepted_tokens(), 2);
  // Computed: positions 0-7 (the accepted proposals' K/V included); block 3 held only the
  // rejected proposal's position 8 and went back to the pool.
  EXPECT_INVARIANTS(scheduler);
  EXPECT_EQ(scheduler.num_blocks_used(), 2);

  // 5 6 7 5 6 7 5 6 9: nothing recurs before 9. The newest token computes alone, in block 3
  // again (the most recently freed).
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 8, 1, true}}));
  EXPECT_EQ(proposals(batch), (std::vector<Ids>{{}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2, 3}}));
  out = scheduler.update(batch, samples({5}));
  EXPECT_EQ(out.num_accepted, (std::vector<int64_t>{0}));
  EXPECT_INVARIANTS(scheduler);
}

// A sequence's proposals shrink by one after a step with a rejection and grow by two after one
// with every proposal accepted, within --speculate.
TEST(SchedulerSpeculation, TheProposalLengthFollowsTheSequencesAcceptance) {
  Scheduler scheduler(config());
  scheduler.add(request({7, 1, 1, 1, 2, 1, 2, 1}, 20), nullptr);
  scheduler.update(scheduler.schedule(), samples({2}));
  // 7 1 1 1 2 1 2 1 2: [1 2 1 2] matches at 3-6, followed by 1 2 (then 1 again, periodically).
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(proposals(batch), (std::vector<Ids>{{1, 2, 1}}));
  // 1 is accepted, then 1 instead of 2: a rejection (the executor samples up to it).
  StepOutput out = scheduler.update(batch, samples({1, 1}));
  EXPECT_EQ(out.num_accepted, (std::vector<int64_t>{1}));
  // ... 2 1 1: [1 1] matches at 2-3, followed by 2 1: two proposed, not three.
  batch = scheduler.schedule();
  EXPECT_EQ(proposals(batch), (std::vector<Ids>{{2, 1}}));
  out = scheduler.update(batch, samples({2, 1, 2}));
  EXPECT_EQ(out.num_accepted, (std::vector<int64_t>{2}));
  // Both accepted: up to three again (two more, within speculate = 3); ... 1 1 2 1 2 matches
  // furthest back at 2-6 (1 1 2 1 2), followed by 1 2 1.
  batch = scheduler.schedule();
  EXPECT_EQ(proposals(batch), (std::vector<Ids>{{1, 2, 1}}));
  scheduler.update(batch, samples({2}));
  EXPECT_INVARIANTS(scheduler);
}

TEST(SchedulerSpeculation, EveryProposalAcceptedAddsTheTokenAfterThem) {
  Scheduler scheduler(config());
  scheduler.add(request({1, 2, 3, 1, 2}, 20), nullptr);
  scheduler.update(scheduler.schedule(), samples({3}));
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(proposals(batch), (std::vector<Ids>{{1, 2, 3}}));
  StepOutput out = scheduler.update(batch, samples({1, 2, 3, 1}));
  EXPECT_EQ(ids_of(out), (Ids{1, 2, 3, 1}));
  EXPECT_EQ(out.num_accepted, (std::vector<int64_t>{3}));
  EXPECT_INVARIANTS(scheduler);
  // Tokens 1 2 3 1 2 3 1 2 3 1, positions 0-8 computed: three blocks, the third partly.
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 9, 1, true}}));
  EXPECT_EQ(batch.sequences[0].sequence->token_ids, (Ids{1, 2, 3, 1, 2, 3, 1, 2, 3, 1}));
  EXPECT_EQ(proposals(batch), (std::vector<Ids>{{2, 3, 1}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2, 3, 4}}));
}

TEST(SchedulerSpeculation, AcceptedFullBlocksEnterThePrefixCacheAndRejectedOnesNever) {
  Scheduler scheduler(config());
  scheduler.add(request({5, 6, 7, 5, 6}, 10), nullptr);
  scheduler.update(scheduler.schedule(), samples({7}));
  scheduler.update(scheduler.schedule(), samples({5, 6, 9}));  // positions 0-7 computed
  // A newcomer whose prompt starts with the 8 verified tokens finds both blocks cached; the
  // rejected proposal 7 at position 8 was never cached (nor is a partial block).
  scheduler.add(request({5, 6, 7, 5, 6, 7, 5, 6, 7, 1}, 4), nullptr);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 8, 1, true}, {1, 8, 2, true}}));
  EXPECT_EQ(tables(batch)[1], (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(scheduler.prefix_cache_hit_tokens(), 8);
  scheduler.update(batch, samples({3, 3}));
  EXPECT_INVARIANTS(scheduler);
}

TEST(SchedulerSpeculation, StopRulesApplyPerTokenAndDropTheRest) {
  // max_new_tokens 3: after the first token, at most 3 - 1 - 1 = 1 proposal.
  {
    Scheduler scheduler(config());
    scheduler.add(request({5, 6, 7, 5, 6}, 3), nullptr);
    scheduler.update(scheduler.schedule(), samples({7}));
    ScheduledBatch batch = scheduler.schedule();
    EXPECT_EQ(proposals(batch), (std::vector<Ids>{{5}}));
    StepOutput out = scheduler.update(batch, samples({5, 6}));
    EXPECT_EQ(ids_of(out), (Ids{5, 6}));
    EXPECT_FALSE(out.tokens[0].event.finish_reason);
    EXPECT_EQ(out.tokens[1].event.finish_reason, FinishReason::kLength);
    EXPECT_EQ(out.finished_seq_ids, (std::vector<int64_t>{0}));
    EXPECT_FALSE(scheduler.has_work());
    EXPECT_EQ(scheduler.num_blocks_used(), 0);
    EXPECT_INVARIANTS(scheduler);
  }
  // EOS accepted as a proposal ends the sequence there: the tokens chosen after it are dropped.
  {
    EngineConfig c = config();
    c.eos_token_ids = {5};
    Scheduler scheduler(c);
    scheduler.add(request({5, 6, 7, 5, 6}, 10), nullptr);
    scheduler.update(scheduler.schedule(), samples({7}));
    ScheduledBatch batch = scheduler.schedule();
    EXPECT_EQ(proposals(batch), (std::vector<Ids>{{5, 6, 7}}));
    StepOutput out = scheduler.update(batch, samples({5, 6, 7, 8}));
    EXPECT_EQ(ids_of(out), (Ids{5}));
    EXPECT_EQ(out.tokens[0].event.finish_reason, FinishReason::kEosToken);
    EXPECT_EQ(out.num_accepted, (std::vector<int64_t>{0}));
    EXPECT_EQ(scheduler.num_accepted_tokens(), 0);
    EXPECT_FALSE(scheduler.has_work());
    EXPECT_EQ(scheduler.num_blocks_used(), 0);
    EXPECT_INVARIANTS(scheduler);
  }
}

TEST(SchedulerSpeculation, ProposalsTakeOnlyFreeBlocksAndNeverPreempt) {
  // 3 usable blocks. Sequence 0 holds blocks 1-2 (positions 0-4 computed), sequence 1 block 3.
  Scheduler scheduler(config(/*num_blocks=*/4));
  scheduler.add(request({5, 6, 7, 5, 6}, 4), nullptr);
  scheduler.add(request({8, 8, 8}, 4), nullptr);
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2}, {3}}));
  scheduler.update(batch, samples({7, 8}));
  // Sequence 0 may propose only into what block 2 has left after its newest token (positions
  // 6-7); sequence 1's block is full once its newest token is in, and none is free.
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 5, 1, true}, {1, 3, 1, true}}));
  EXPECT_EQ(proposals(batch), (std::vector<Ids>{{5, 6}, {}}));
  EXPECT_EQ(tables(batch), (std::vector<std::vector<int32_t>>{{1, 2}, {3}}));
  EXPECT_EQ(scheduler.num_preemptions(), 0);
  scheduler.update(batch, samples({5, 1, 8}));
  EXPECT_INVARIANTS(scheduler);
}

TEST(SchedulerSpeculation, OffProposesNothing) {
  Scheduler scheduler(config(64, /*speculate=*/0));
  scheduler.add(request({5, 6, 7, 5, 6}, 10), nullptr);
  scheduler.update(scheduler.schedule(), samples({7}));
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(proposals(batch), (std::vector<Ids>{{}}));
  EXPECT_EQ(batch.num_proposed_tokens(), 0);
}

}  // namespace
}  // namespace lm
