// Scheduler under random load (fixed seeds): arrivals, cancellations, shared prefixes and so few
// blocks that sequences are preempted. A fake executor keeps a paged token "cache" and samples
// from what it reads through the block tables, so any wrong table, hit or overwrite changes the
// output; every request must end with exactly the tokens it gets when run alone. Blocks the
// prefix cache's budget hands back are wiped, as their memory is, so a handed-back block that
// was still read would change the output too. With speculation the executor writes the
// proposals' tokens too and verifies them as the model executor does, so a rejected proposal
// left readable, or a block kept or freed wrongly on rollback, changes the output as well.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "engine/scheduler.h"

namespace lm {
namespace {

constexpr int32_t kVocab = 40;
constexpr int32_t kEos = 7;

// The fake model's greedy choice after `tokens`.
int32_t next_token(const std::vector<int32_t>& tokens) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : tokens) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return static_cast<int32_t>(h % kVocab);
}

// A fake model for speculation: it mostly repeats the token three back (so n-gram proposals
// are often right) and otherwise takes next_token's choice; either way the whole prefix decides,
// so a wrong slot read still changes the output.
int32_t next_token_repetitive(const std::vector<int32_t>& tokens) {
  const int32_t hashed = next_token(tokens);
  if (tokens.size() < 3 || hashed % 4 == 0) return hashed;
  return tokens[tokens.size() - 3];
}

using Model = int32_t (*)(const std::vector<int32_t>&);

// What the request produces alone: greedy tokens until max_new_tokens or EOS.
std::vector<int32_t> run_alone(const EngineRequest& request, Model model) {
  std::vector<int32_t> tokens = request.prompt_ids;
  std::vector<int32_t> out;
  while (static_cast<int64_t>(out.size()) < request.max_new_tokens) {
    out.push_back(model(tokens));
    tokens.push_back(out.back());
    if (out.back() == kEos) break;
  }
  return out;
}

// A paged cache of token ids: the K/V stand-in. Writes every entry's tokens at their slots, then
// reads each entry's whole prefix back through its block table.
class PagedFakeExecutor {
 public:
  PagedFakeExecutor(int64_t num_blocks, int64_t block_size, Model model)
      : block_size_(block_size),
        model_(model),
        slots_(static_cast<size_t>(num_blocks * block_size), -1) {}

  // The pages of handed-back blocks read as zeros: here, as no token.
  void return_blocks(const std::vector<int32_t>& block_ids) {
    for (int32_t id : block_ids)
      std::fill_n(slots_.begin() + id * block_size_, block_size_, kWiped);
  }

  std::vector<SampleResult> execute(const ScheduledBatch& batch, const BlockManager& blocks) {
    for (const ScheduledSequence& entry : batch.sequences) {
      const int64_t end = entry.first_position + entry.num_tokens;
      const int64_t query_end = entry.first_position + entry.num_query_tokens();
      EXPECT_EQ(static_cast<int64_t>(entry.block_table.size()),
                (query_end + block_size_ - 1) / block_size_);
      EXPECT_EQ(entry.samples, end == entry.sequence->num_tokens());
      for (int64_t p = entry.first_position; p < query_end; ++p) {
        const int32_t block_id = entry.block_table[static_cast<size_t>(p / block_size_)];
        EXPECT_NE(block_id, 0);
        EXPECT_EQ(blocks.ref_count(block_id), 1) << "a write into a shared block";
        slot(entry, p) = p < end ? entry.sequence->token_ids[static_cast<size_t>(p)]
                                 : entry.proposed_ids[static_cast<size_t>(p - end)];
      }
    }
    std::vector<SampleResult> out;
    for (const ScheduledSequence& entry : batch.sequences) {
      if (!entry.samples) continue;
      std::vector<int32_t> seen;
      for (int64_t p = 0; p < entry.first_position + entry.num_tokens; ++p)
        seen.push_back(slot(entry, p));
      // The verification rule: a token per row while the one before matched its proposal.
      for (size_t r = 0; r <= entry.proposed_ids.size(); ++r) {
        if (r > 0) seen.push_back(slot(entry, entry.first_position + entry.num_tokens + r - 1));
        SampleResult token;
        token.id = model_(seen);
        out.push_back(token);
        if (r == entry.proposed_ids.size() || token.id != entry.proposed_ids[r]) break;
      }
    }
    return out;
  }

 private:
  int32_t& slot(const ScheduledSequence& entry, int64_t p) {
    const int32_t block_id = entry.block_table[static_cast<size_t>(p / block_size_)];
    return slots_[static_cast<size_t>(block_id * block_size_ + p % block_size_)];
  }

  static constexpr int32_t kWiped = -2;
  int64_t block_size_;
  Model model_;
  std::vector<int32_t> slots_;
};

struct Totals {
  int64_t preemptions = 0;
  int64_t hit_tokens = 0;
  int64_t cancelled = 0;
  int64_t returned_blocks = 0;
  int64_t proposed_tokens = 0;
  int64_t accepted_tokens = 0;
};

void run_seed(uint32_t seed, bool prefix_caching, Totals& totals, bool latency_target = false,
              bool speculate = false) {
  SCOPED_TRACE(::testing::Message()
               << "seed " << seed << " prefix_caching " << prefix_caching << " latency_target "
               << latency_target << " speculate " << speculate);
  const Model model = speculate ? next_token_repetitive : next_token;
  std::mt19937 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = uniform(6, 12);
  config.max_batch_prefill_tokens = uniform(3, 24);
  if (uniform(0, 1) == 1) config.max_batch_size = uniform(1, 6);
  config.max_batch_total_tokens = 1000;
  config.eos_token_ids = {kEos};
  config.prefix_caching = prefix_caching;
  // No budget, or a few unused cached blocks at most (0: dropped as soon as unused).
  config.max_cached_blocks = std::vector<int64_t>{-1, -1, 0, 1, 2, 4}[uniform(0, 5)];
  if (latency_target) {
    config.max_step_latency_ms = uniform(1, 40);
    config.min_prefill_chunk_tokens = uniform(1, 8);
  }
  if (speculate) config.speculate = uniform(1, 5);
  Scheduler scheduler(config);
  if (latency_target) {
    scheduler.cost_model() =
        StepCostModel::fixed({.intercept = 0.001 * static_cast<double>(uniform(0, 5)),
                              .per_prefill_token = 0.001 * static_cast<double>(uniform(1, 4)),
                              .per_decode_row = 0.001 * static_cast<double>(uniform(1, 8)),
                              .per_attended_token = 1e-5 * static_cast<double>(uniform(0, 3))});
  }
  PagedFakeExecutor executor(config.num_blocks, config.block_size, model);

  // Prompts start with one of a few shared prefixes so the cache has something to find.
  std::vector<std::vector<int32_t>> prefixes(3);
  for (std::vector<int32_t>& prefix : prefixes) {
    const int64_t len = uniform(4, 12);
    for (int64_t i = 0; i < len; ++i) prefix.push_back(static_cast<int32_t>(uniform(8, 39)));
  }
  std::map<int64_t, EngineRequest> requests;
  std::map<int64_t, std::vector<int32_t>> outputs;
  std::map<int64_t, bool> finished;
  std::vector<int64_t> cancelled;
  const int kArrivalSteps = 150;
  for (int step = 0; step < 5000 && (step < kArrivalSteps || scheduler.has_work()); ++step) {
    if (step < kArrivalSteps && uniform(0, 2) == 0) {
      EngineRequest request;
      if (uniform(0, 3) > 0) request.prompt_ids = prefixes[static_cast<size_t>(uniform(0, 2))];
      const int64_t suffix = uniform(request.prompt_ids.empty() ? 1 : 0, 8);
      for (int64_t i = 0; i < suffix; ++i)
        request.prompt_ids.push_back(static_cast<int32_t>(uniform(8, 39)));
      request.max_new_tokens = uniform(1, 12);
      request.use_prefix_cache = uniform(0, 5) > 0;
      if (!scheduler.fits_empty_batch(request)) continue;
      const int64_t seq_id = scheduler.add(request, nullptr);
      requests[seq_id] = request;
    }
    if (uniform(0, 19) == 0 && !requests.empty()) {
      const int64_t victim = uniform(0, static_cast<int64_t>(requests.size()) - 1);
      for (const std::unique_ptr<Sequence>& seq :
           scheduler.remove_if([&](const Sequence& s) { return s.id == victim; }))
        cancelled.push_back(seq->id);
    }
    // Handed back where the engine hands them back: before the batch computes and after it.
    auto return_blocks = [&] {
      const std::vector<int32_t> ids = scheduler.take_returned_blocks();
      totals.returned_blocks += static_cast<int64_t>(ids.size());
      executor.return_blocks(ids);
    };
    ScheduledBatch batch = scheduler.schedule();
    return_blocks();
    const std::vector<SampleResult> samples = executor.execute(batch, scheduler.block_manager());
    StepOutput out = scheduler.update(batch, samples);
    return_blocks();
    for (const TokenOutput& token : out.tokens)
      outputs[token.seq_id].push_back(token.event.token.id);
    for (int64_t seq_id : out.finished_seq_ids) finished[seq_id] = true;
    Status status = scheduler.check_invariants();
    ASSERT_TRUE(status.ok()) << "step " << step << ": " << status.error().message;
  }
  ASSERT_FALSE(scheduler.has_work()) << "some request never finished";
  EXPECT_EQ(scheduler.num_blocks_used(), 0);
  EXPECT_EQ(scheduler.num_reserved_tokens(), 0);
  for (const auto& [seq_id, request] : requests) {
    const std::vector<int32_t> expected = run_alone(request, model);
    const std::vector<int32_t>& got = outputs[seq_id];
    const bool was_cancelled =
        std::find(cancelled.begin(), cancelled.end(), seq_id) != cancelled.end();
    EXPECT_NE(was_cancelled, finished[seq_id]) << "seq " << seq_id;
    if (was_cancelled) {
      ASSERT_LE(got.size(), expected.size()) << "seq " << seq_id;
      EXPECT_EQ(got, std::vector<int32_t>(expected.begin(),
                                          expected.begin() + static_cast<int64_t>(got.size())))
          << "seq " << seq_id;
    } else {
      EXPECT_EQ(got, expected) << "seq " << seq_id;
    }
  }
  totals.preemptions += scheduler.num_preemptions();
  totals.hit_tokens += scheduler.prefix_cache_hit_tokens();
  totals.cancelled += static_cast<int64_t>(cancelled.size());
  totals.proposed_tokens += scheduler.num_proposed_tokens();
  totals.accepted_tokens += scheduler.num_accepted_tokens();
}

TEST(SchedulerStress, RandomLoadMatchesEachRequestRunAlone) {
  Totals totals;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    run_seed(seed, /*prefix_caching=*/true, totals);
    run_seed(seed, /*prefix_caching=*/false, totals);
  }
  // The load really exercised what it is meant to.
  EXPECT_GT(totals.preemptions, 100);
  EXPECT_GT(totals.hit_tokens, 1000);
  EXPECT_GT(totals.cancelled, 50);
  EXPECT_GT(totals.returned_blocks, 100);
}

// The same load with --max-step-latency-ms: prompt chunks sized by a cost model, prompts admitted
// beside running ones; every request still ends with exactly its tokens when run alone.
TEST(SchedulerStress, RandomLoadUnderALatencyTargetMatchesEachRequestRunAlone) {
  Totals totals;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    run_seed(seed, /*prefix_caching=*/true, totals, /*latency_target=*/true);
    run_seed(seed, /*prefix_caching=*/false, totals, /*latency_target=*/true);
  }
  EXPECT_GT(totals.preemptions, 100);
  EXPECT_GT(totals.hit_tokens, 1000);
  EXPECT_GT(totals.cancelled, 50);
}

// The same load with n-gram speculation (with and without the latency target): proposals
// verified, accepted ones kept, rejected ones rolled back, under preemption and prefix sharing;
// every request still ends with exactly its tokens when run alone.
TEST(SchedulerStress, RandomLoadWithSpeculationMatchesEachRequestRunAlone) {
  Totals totals;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    for (bool latency_target : {false, true}) {
      run_seed(seed, /*prefix_caching=*/true, totals, latency_target, /*speculate=*/true);
      run_seed(seed, /*prefix_caching=*/false, totals, latency_target, /*speculate=*/true);
    }
  }
  EXPECT_GT(totals.preemptions, 100);
  EXPECT_GT(totals.hit_tokens, 1000);
  EXPECT_GT(totals.proposed_tokens, 1000);
  EXPECT_GT(totals.accepted_tokens, 500);
  EXPECT_LT(totals.accepted_tokens, totals.proposed_tokens);  // rejections were rolled back too
}

}  // namespace
}  // namespace lm
