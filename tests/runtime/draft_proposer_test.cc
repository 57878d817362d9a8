// DraftProposer on a real checkpoint: its proposals are the draft model's own greedy
// continuation, after the target rejects some of them it recomputes only the tokens that
// changed, and its K/V pool is shared out and handed back as sequences come and go.
#include "runtime/draft_proposer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "engine/run_to_completion.h"
#include "runtime/model_executor.h"

namespace lm {
namespace {

namespace fs = std::filesystem;

const fs::path kDraftModel =
    fs::path(LM_BUILD_ROOT) / "test-models" / "kquant-gguf" / "model-kquants.gguf";

std::unique_ptr<LlamaModel> load_draft() {
  auto loaded = LlamaModel::load(kDraftModel.string());
  EXPECT_TRUE(loaded.ok()) << loaded.error().message << " (run `make fixtures-test`)";
  if (!loaded.ok()) return nullptr;
  (*loaded)->set_int8_activations(true);
  return std::move(loaded).value();
}

// The model's greedy continuation of `prompt`, decoded plainly by an Engine.
std::vector<int32_t> greedy(LlamaModel& model, ThreadPool& pool, std::vector<int32_t> prompt,
                            int64_t num_tokens) {
  EngineConfig config;
  config.max_batch_total_tokens = 1024;
  Engine engine(config, std::make_unique<ModelExecutor>(model, pool, config));
  EngineRequest request;
  request.prompt_ids = std::move(prompt);
  request.max_new_tokens = num_tokens;
  request.ignore_eos = true;
  auto result = run_to_completion(engine, std::move(request));
  EXPECT_TRUE(result.ok());
  std::vector<int32_t> ids;
  if (result.ok()) {
    for (const SampleResult& t : result->tokens) ids.push_back(t.id);
  }
  return ids;
}

std::vector<int32_t> prompt(int64_t seed, int64_t length, int64_t vocab_size) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < length; ++i)
    ids.push_back(static_cast<int32_t>((seed * 131 + i * 17 + i * i) % vocab_size));
  return ids;
}

TEST(DraftProposer, ProposesTheDraftsGreedyContinuationAndRecomputesOnlyWhatChanged) {
  std::unique_ptr<LlamaModel> model = load_draft();
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  const int64_t vocab = model->config().vocab_size;
  DraftProposer drafter(*model, pool, /*num_blocks=*/64, /*block_size=*/4, DType::kF16, vocab);

  // Two sequences drafted in one batch, with different lengths and proposal counts.
  std::vector<int32_t> a = prompt(1, 13, vocab);
  std::vector<int32_t> b = prompt(2, 6, vocab);
  std::vector<ProposalSlot> slots(2);
  slots[0] = {.seq_id = 7, .token_ids = a, .max_tokens = 5, .proposed = {}};
  slots[1] = {.seq_id = 9, .token_ids = b, .max_tokens = 3, .proposed = {}};
  // Before it has seen them, a sequence would catch up on all its ids but the last.
  EXPECT_EQ(drafter.catch_up_rows(7, a), 12);
  EXPECT_EQ(drafter.catch_up_rows(9, b), 5);
  drafter.propose(slots);
  EXPECT_GT(drafter.last_catch_up_seconds(), 0);
  EXPECT_EQ(slots[0].proposed, greedy(*model, pool, a, 5));
  EXPECT_EQ(slots[1].proposed, greedy(*model, pool, b, 3));
  // Catch-up rows (13 + 6), then the proposals fed back but the last (4 + 2).
  EXPECT_EQ(drafter.num_computed_rows(), 13 + 6 + 4 + 2);
  // Beyond the one row each sequence computes anyway: all but the last of each prompt.
  EXPECT_EQ(drafter.last_catch_up_rows(), 12 + 5);
  EXPECT_FALSE(drafter.cheap_to_resume());
  EXPECT_EQ(drafter.num_sequences(), 2);

  // The target took a's first two proposals and then chose a token of its own.
  const std::vector<int32_t> first = slots[0].proposed;
  a.insert(a.end(), first.begin(), first.begin() + 2);
  a.push_back((first[2] + 1) % static_cast<int32_t>(vocab));
  std::vector<ProposalSlot> again(1);
  again[0] = {.seq_id = 7, .token_ids = a, .max_tokens = 4, .proposed = {}};
  // What it holds of a's ids now: all but the target's own token (the last, computed anyway).
  EXPECT_EQ(drafter.catch_up_rows(7, a), 0);
  const int64_t rows_before = drafter.num_computed_rows();
  drafter.propose(again);
  EXPECT_EQ(again[0].proposed, greedy(*model, pool, a, 4));
  // Only the token the target chose is caught up (its K/V from the first call is kept up to
  // the accepted proposals), then 3 fed back.
  EXPECT_EQ(drafter.num_computed_rows() - rows_before, 1 + 3);
  EXPECT_EQ(drafter.last_catch_up_rows(), 0);
  EXPECT_EQ(drafter.last_catch_up_seconds(), 0);
  // The target accepts all 4 and adds its own token: the draft fed back 3 of them, so it catches
  // up on the fourth (the own token's row it computes anyway).
  a.insert(a.end(), again[0].proposed.begin(), again[0].proposed.end());
  a.push_back(0);
  EXPECT_EQ(drafter.catch_up_rows(7, a), 1);
}

TEST(DraftProposer, SharesItsPoolOutAndHandsItBack) {
  std::unique_ptr<LlamaModel> model = load_draft();
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  const int64_t vocab = model->config().vocab_size;
  // 6 usable blocks of 4 tokens: one 12-token sequence with 4 proposals needs 4 (15 positions).
  DraftProposer drafter(*model, pool, /*num_blocks=*/7, /*block_size=*/4, DType::kF32, vocab);
  const std::vector<int32_t> a = prompt(3, 12, vocab);
  const std::vector<int32_t> b = prompt(4, 12, vocab);
  std::vector<ProposalSlot> slot(1);
  slot[0] = {.seq_id = 1, .token_ids = a, .max_tokens = 4, .proposed = {}};
  drafter.propose(slot);
  EXPECT_EQ(slot[0].proposed.size(), 4u);
  EXPECT_EQ(drafter.num_free_blocks(), 2);

  // Both in one call: the second gets what is left (2 blocks: 8 positions < 12): nothing.
  std::vector<ProposalSlot> both(2);
  both[0] = {.seq_id = 1, .token_ids = a, .max_tokens = 4, .proposed = {}};
  both[1] = {.seq_id = 2, .token_ids = b, .max_tokens = 4, .proposed = {}};
  drafter.propose(both);
  EXPECT_EQ(both[0].proposed, slot[0].proposed);
  EXPECT_TRUE(both[1].proposed.empty());

  // Alone, the second takes the first's blocks (drafted for less recently), and proposes what
  // the draft decodes.
  std::vector<ProposalSlot> second(1);
  second[0] = {.seq_id = 2, .token_ids = b, .max_tokens = 4, .proposed = {}};
  drafter.propose(second);
  EXPECT_EQ(second[0].proposed, greedy(*model, pool, b, 4));
  EXPECT_EQ(drafter.num_sequences(), 1);

  // Its blocks come back when it leaves; releasing an unknown sequence is harmless.
  drafter.release(2);
  drafter.release(42);
  EXPECT_EQ(drafter.num_sequences(), 0);
  EXPECT_EQ(drafter.num_free_blocks(), 6);
}

// Where the target's logits are narrower than the draft's, no proposal names an id past them.
TEST(DraftProposer, ProposesOnlyIdsTheTargetHas) {
  std::unique_ptr<LlamaModel> model = load_draft();
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  DraftProposer drafter(*model, pool, /*num_blocks=*/16, /*block_size=*/4, DType::kF16,
                        /*num_ids=*/5);
  std::vector<ProposalSlot> slot(1);
  const std::vector<int32_t> ids = prompt(5, 9, 5);
  slot[0] = {.seq_id = 3, .token_ids = ids, .max_tokens = 6, .proposed = {}};
  drafter.propose(slot);
  ASSERT_EQ(slot[0].proposed.size(), 6u);
  for (int32_t id : slot[0].proposed) EXPECT_LT(id, 5);
}

}  // namespace
}  // namespace lm
