// Scheduler: exact batches for hand-built queues (FIFO admission, batch size, prefill chunking,
// token budget head-of-line blocking, joining a running batch) and the finish rules.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <tuple>
#include <vector>

namespace lm {
namespace {

// One scheduled entry as (seq_id, first_position, num_tokens, samples).
using Entry = std::tuple<int64_t, int64_t, int64_t, bool>;

std::vector<Entry> entries(const ScheduledBatch& batch) {
  std::vector<Entry> out;
  for (const ScheduledSequence& s : batch.sequences)
    out.emplace_back(s.seq_id, s.first_position, s.num_tokens, s.samples);
  return out;
}

// A prompt of `prompt_len` ids first_id, first_id + 1, ...
EngineRequest request(int64_t prompt_len, int64_t max_new_tokens, int32_t first_id = 100) {
  EngineRequest r;
  for (int64_t i = 0; i < prompt_len; ++i)
    r.prompt_ids.push_back(first_id + static_cast<int32_t>(i));
  r.max_new_tokens = max_new_tokens;
  return r;
}

std::vector<SampleResult> samples(std::initializer_list<int32_t> ids) {
  std::vector<SampleResult> out;
  for (int32_t id : ids) {
    SampleResult r;
    r.id = id;
    out.push_back(r);
  }
  return out;
}

EngineConfig config(int64_t prefill_tokens, int64_t total_tokens) {
  EngineConfig c;
  c.max_batch_prefill_tokens = prefill_tokens;
  c.max_batch_total_tokens = total_tokens;
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

  out = scheduler.update(batch, samples({9, 10}));
  ASSERT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.tokens[0].event.finish_reason, FinishReason::kLength);
  EXPECT_EQ(out.tokens[1].event.finish_reason, FinishReason::kLength);
  EXPECT_EQ(out.finished_seq_ids, (std::vector<int64_t>{0, 1}));
  EXPECT_FALSE(scheduler.has_work());
  EXPECT_EQ(scheduler.num_reserved_tokens(), 0);
  EXPECT_TRUE(scheduler.schedule().empty());
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

TEST(Scheduler, TokenBudgetBlocksTheHeadOfTheQueueWithoutSkippingAhead) {
  Scheduler scheduler(config(100, 20));
  scheduler.add(request(5, 1), nullptr);   // 6 tokens
  scheduler.add(request(5, 10), nullptr);  // 15: 6 + 15 > 20, waits
  scheduler.add(request(2, 2), nullptr);   // 4 would fit, but must not pass the head
  EXPECT_FALSE(scheduler.fits_empty_batch(request(5, 16)));
  EXPECT_TRUE(scheduler.fits_empty_batch(request(5, 15)));
  EXPECT_FALSE(scheduler.fits_empty_batch(request(0, 15)));
  EXPECT_FALSE(scheduler.fits_empty_batch(request(5, 0)));

  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 5, true}}));
  EXPECT_EQ(scheduler.num_waiting(), 2);
  StepOutput out = scheduler.update(batch, samples({1}));
  EXPECT_EQ(out.finished_seq_ids, (std::vector<int64_t>{0}));
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{1, 0, 5, true}, {2, 0, 2, true}}));
  EXPECT_EQ(scheduler.num_reserved_tokens(), 19);
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

TEST(Scheduler, RemoveIfDropsWaitingAndRunningSequencesAndFreesTheirBudget) {
  Scheduler scheduler(config(100, 30));
  scheduler.add(request(5, 5), nullptr);   // 10
  scheduler.add(request(5, 10), nullptr);  // 15
  scheduler.add(request(5, 10), nullptr);  // 15: waits
  scheduler.add(request(1, 1), nullptr);   // behind the blocked head
  ScheduledBatch batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{0, 0, 5, true}, {1, 0, 5, true}}));
  (void)scheduler.update(batch, samples({1, 1}));

  std::vector<std::unique_ptr<Sequence>> removed =
      scheduler.remove_if([](const Sequence& seq) { return seq.id == 0 || seq.id == 3; });
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0]->id, 3);  // waiting ones come first
  EXPECT_EQ(removed[0]->status, SequenceStatus::kWaiting);
  EXPECT_EQ(removed[1]->id, 0);
  EXPECT_EQ(removed[1]->token_ids, (std::vector<int32_t>{100, 101, 102, 103, 104, 1}));
  EXPECT_EQ(scheduler.num_reserved_tokens(), 15);
  batch = scheduler.schedule();
  EXPECT_EQ(entries(batch), (std::vector<Entry>{{1, 5, 1, true}, {2, 0, 5, true}}));
  EXPECT_EQ(scheduler.num_reserved_tokens(), 30);
}

}  // namespace
}  // namespace lm
