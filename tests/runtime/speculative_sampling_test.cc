// Sampled requests keep the target model's distribution under speculation. A verified row is
// drawn from the target's processed distribution p with the sequence's own generator and the
// proposal x is accepted when the draw is x: accepted with probability p(x), and when rejected
// the token is p's draw conditioned on not being x, i.e. max(0, p - q) renormalised for the
// point-mass proposal q = [x] that n-gram lookup and a greedy draft make. That is the standard
// speculative-sampling rule (Leviathan et al., Chen et al.) for such proposals, and it draws what
// plain decoding draws with the same seed. Checked here by counting: many seeded requests over a
// tiny vocabulary (top_k 4 of a 384-token model), whose second token is verified against a
// proposal whenever the first is one the prompt has seen before; the tokens' frequencies against
// the target's probabilities (computed apart, one forward per context) by a chi-square bound,
// and the accepted proposals against the sum of their probabilities.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "../common/sequence_forward.h"
#include "collecting_sink.h"
#include "engine/engine.h"
#include "runtime/model_executor.h"

namespace lm {
namespace {

namespace fs = std::filesystem;

using testing_helpers::CollectingSink;

constexpr int32_t kTopK = 4;
constexpr float kTemperature = 0.7f;
constexpr int kNumDraws = 4000;

// The model's logits for the token after `ids`, and the token ids ranked by them, best first.
struct NextToken {
  std::vector<float> logits;
  std::vector<int32_t> ranked;
};

NextToken next_token(LlamaModel& model, const std::vector<int32_t>& ids, ThreadPool& pool) {
  SequenceForward sequence(model, static_cast<int64_t>(ids.size()) + 1);
  NextToken next{sequence.run(ids, /*all_logits=*/false, pool), {}};
  next.ranked.resize(next.logits.size());
  std::iota(next.ranked.begin(), next.ranked.end(), 0);
  std::sort(next.ranked.begin(), next.ranked.end(),
            [&](int32_t a, int32_t b) { return next.logits[a] > next.logits[b]; });
  return next;
}

// The sampler's distribution over the next token after `ids`: the kTopK best logits at
// kTemperature, softmax (ties do not occur in a random model's logits).
std::map<int32_t, double> target_distribution(LlamaModel& model, const std::vector<int32_t>& ids,
                                              ThreadPool& pool) {
  const NextToken next = next_token(model, ids, pool);
  std::map<int32_t, double> p;
  double sum = 0.0;
  for (int i = 0; i < kTopK; ++i) {
    const int32_t id = next.ranked[static_cast<size_t>(i)];
    p[id] = std::exp((next.logits[id] - next.logits[next.ranked[0]]) / kTemperature);
    sum += p[id];
  }
  for (auto& [id, weight] : p) weight /= sum;
  return p;
}

// A prompt that ends in `last` and holds, before it, "last c a" for each candidate first token c
// (the first token's likeliest choices): after "... last c" prompt lookup proposes a. Each a is
// the likeliest token after the prompt and c not used elsewhere, so proposals are often accepted
// and often not; rebuilt a few times since each a changes the prompt the choices depend on.
struct SeededPrompt {
  std::vector<int32_t> ids;
  std::map<int32_t, int32_t> proposal_after;  // candidate first token -> the token proposed
};

SeededPrompt seeded_prompt(LlamaModel& model, ThreadPool& pool) {
  const std::vector<int32_t> tail = {11, 29, 57, 101, 203, 150};
  SeededPrompt prompt{tail, {}};
  for (int round = 0; round < 4; ++round) {
    const std::vector<int32_t> first = next_token(model, prompt.ids, pool).ranked;
    std::set<int32_t> used(tail.begin(), tail.end());
    std::vector<int32_t> candidates;
    for (int32_t id : first) {
      if (candidates.size() == 2 * kTopK) break;
      if (used.insert(id).second) candidates.push_back(id);
    }
    std::map<int32_t, int32_t> proposal_after;
    for (int32_t c : candidates) {
      std::vector<int32_t> context = prompt.ids;
      context.push_back(c);
      for (int32_t a : next_token(model, context, pool).ranked) {
        if (used.insert(a).second) {
          proposal_after[c] = a;
          break;
        }
      }
    }
    std::vector<int32_t> ids;
    for (int32_t c : candidates) ids.insert(ids.end(), {tail.back(), c, proposal_after[c]});
    ids.insert(ids.end(), tail.begin(), tail.end());
    prompt = {ids, proposal_after};
  }
  return prompt;
}

struct Draws {
  std::vector<std::vector<int32_t>> tokens;  // per request: its 3 tokens
  EngineStats stats;
};

// kNumDraws requests of 3 tokens with seeds 1..kNumDraws, 32 at a time.
Draws draw(LlamaModel& model, const std::vector<int32_t>& prompt, int64_t speculate) {
  ThreadPool pool(2);
  EngineConfig config;
  config.max_batch_total_tokens = 4096;
  config.eos_token_ids = model.config().eos_token_ids;
  config.speculate = speculate;
  Engine engine(config, std::make_unique<ModelExecutor>(model, pool, config));
  Draws out;
  for (int first = 0; first < kNumDraws; first += 32) {
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    for (int i = first; i < std::min(kNumDraws, first + 32); ++i) {
      EngineRequest request;
      request.prompt_ids = prompt;
      request.max_new_tokens = 3;
      request.ignore_eos = true;
      request.sampling.do_sample = true;
      request.sampling.seed = static_cast<uint64_t>(i + 1);
      request.sampling.temperature = kTemperature;
      request.sampling.top_k = kTopK;
      sinks.push_back(std::make_shared<CollectingSink>());
      EXPECT_TRUE(engine.submit(request, sinks.back()).ok());
    }
    for (const auto& sink : sinks) {
      std::vector<int32_t> ids;
      for (const SampleResult& t : sink->wait(std::chrono::seconds(60)).tokens) ids.push_back(t.id);
      out.tokens.push_back(ids);
    }
  }
  engine.drain();
  out.stats = engine.stats();
  return out;
}

// The chi-square statistic of `counts` against n * p, added to *statistic, with its degrees of
// freedom added to *dof. Cells expected fewer than 5 times are pooled (with the next rarest until
// the pool reaches 5), as the chi-square approximation needs.
void add_chi_square(const std::map<int32_t, int64_t>& counts, const std::map<int32_t, double>& p,
                    double* statistic, int* dof) {
  int64_t n = 0;
  for (const auto& [id, count] : counts) n += count;
  for (const auto& [id, count] : counts)
    EXPECT_TRUE(p.count(id)) << "token " << id << " drawn outside the target's top " << kTopK;
  std::vector<std::pair<double, double>> cells;  // (expected, observed), rarest first
  for (const auto& [id, prob] : p) {
    const auto it = counts.find(id);
    cells.emplace_back(static_cast<double>(n) * prob,
                       it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
  std::sort(cells.begin(), cells.end());
  while (cells.size() > 1 && cells[0].first < 5.0) {
    cells[1] = {cells[0].first + cells[1].first, cells[0].second + cells[1].second};
    cells.erase(cells.begin());
    std::sort(cells.begin(), cells.end());
  }
  if (cells.size() < 2) return;
  for (const auto& [expected, observed] : cells)
    *statistic += (observed - expected) * (observed - expected) / expected;
  *dof += static_cast<int>(cells.size()) - 1;
}

// The chi-square quantile at 1 - 1e-4 (Wilson-Hilferty: within 1% for dof >= 3).
double chi_square_bound(int dof) {
  const double z = 3.719;  // the standard normal's 1 - 1e-4 quantile
  const double k = static_cast<double>(dof);
  return k * std::pow(1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k)), 3.0);
}

TEST(SpeculativeSampling, KeepsTheTargetDistributionAndAcceptsWithTheTargetsProbability) {
  auto loaded =
      LlamaModel::load((fs::path(LM_BUILD_ROOT) / "test-models" / "llama_mha_untied").string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message << " (run `make fixtures-test`)";
  LlamaModel& model = **loaded;
  ThreadPool pool(2);
  const SeededPrompt prompt = seeded_prompt(model, pool);

  const Draws speculative = draw(model, prompt.ids, /*speculate=*/2);
  // Seeded: the same draws as plain decoding, token for token.
  EXPECT_EQ(speculative.tokens, draw(model, prompt.ids, /*speculate=*/0).tokens);

  // Tokens 1, 2 and 3 grouped by the tokens before them, against the target after them.
  std::map<std::vector<int32_t>, std::map<int32_t, int64_t>> counts;
  int64_t num_proposed = 0, num_accepted = 0;
  for (const std::vector<int32_t>& t : speculative.tokens) {
    ASSERT_EQ(t.size(), 3u);
    ++counts[{}][t[0]];
    ++counts[{t[0]}][t[1]];
    ++counts[{t[0], t[1]}][t[2]];
    // Token 2 after a first token the prompt has seen is verified against that proposal.
    const auto proposal = prompt.proposal_after.find(t[0]);
    if (proposal == prompt.proposal_after.end()) continue;
    ++num_proposed;
    num_accepted += t[1] == proposal->second ? 1 : 0;
  }
  // Every such token 2 was a verified proposal (no step ran short of budget; after token 2 one
  // token is left, so nothing more is proposed), and the engine accepted those that drew it.
  EXPECT_EQ(speculative.stats.num_proposed_tokens, num_proposed);
  EXPECT_EQ(speculative.stats.num_accepted_tokens, num_accepted);
  double statistic = 0.0;
  int dof = 0;
  int groups = 0;
  double expected_accepted = 0.0, accepted_variance = 0.0;
  for (const auto& [before, drawn] : counts) {
    int64_t n = 0;
    for (const auto& [id, count] : drawn) n += count;
    std::vector<int32_t> context = prompt.ids;
    context.insert(context.end(), before.begin(), before.end());
    const std::map<int32_t, double> p = target_distribution(model, context, pool);
    if (before.size() == 1 && prompt.proposal_after.count(before[0])) {
      const auto x = p.find(prompt.proposal_after.at(before[0]));
      const double px = x == p.end() ? 0.0 : x->second;
      expected_accepted += static_cast<double>(n) * px;
      accepted_variance += static_cast<double>(n) * px * (1.0 - px);
    }
    if (n < 50) continue;  // too few draws in this context to say much
    add_chi_square(drawn, p, &statistic, &dof);
    ++groups;
  }
  const double bound = chi_square_bound(dof);
  std::cout << "[ measured ] chi-square " << statistic << " over " << dof << " degrees of freedom ("
            << groups << " contexts), bound " << bound << " at p = 1e-4; proposals accepted "
            << num_accepted << " of " << num_proposed << ", expected " << expected_accepted << "\n";
  EXPECT_GE(groups, 4);
  EXPECT_LT(statistic, bound);
  EXPECT_GT(num_proposed, kNumDraws / 4);
  // Acceptance has the target's probability of the proposal: within 4 standard deviations.
  EXPECT_GT(num_accepted, 0);
  EXPECT_LT(num_accepted, num_proposed);
  EXPECT_LT(std::abs(static_cast<double>(num_accepted) - expected_accepted),
            4.0 * std::sqrt(accepted_variance));
}

}  // namespace
}  // namespace lm
