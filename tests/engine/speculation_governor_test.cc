// SpeculationGovernor on hand-fed step times: speculation tried first, then plain decoding, then
// the faster arm with the slower one probed every 16th step (speculation by a proposer costly to
// resume not probed); batch sizes decided apart; a change of speed followed; a catch-up judged
// against the tokens left to earn it back.
#include "engine/speculation_governor.h"

#include <gtest/gtest.h>

#include <vector>

namespace lm {
namespace {

// Runs `num_steps` steps of `num_decoding` sequences: each asks the governor, then reports the
// step at `plain_spt` / `speculative_spt` seconds per token (5 tokens a sequence when it
// proposed, 1 otherwise). Returns the decisions.
std::vector<bool> run(SpeculationGovernor& g, int64_t num_decoding, int num_steps, double plain_spt,
                      double speculative_spt) {
  std::vector<bool> decisions;
  for (int i = 0; i < num_steps; ++i) {
    const bool proposed = g.should_propose(num_decoding);
    decisions.push_back(proposed);
    const int64_t tokens = num_decoding * (proposed ? 5 : 1);
    g.observe(proposed, num_decoding, tokens,
              static_cast<double>(tokens) * (proposed ? speculative_spt : plain_spt));
  }
  return decisions;
}

int count(const std::vector<bool>& v, bool value) {
  int n = 0;
  for (bool b : v) n += b == value ? 1 : 0;
  return n;
}

TEST(SpeculationGovernor, MeasuresBothArmsThenRunsTheFasterAndProbesTheOther) {
  SpeculationGovernor g;
  // Speculation at 8 ms a token, plain decoding at 10: speculation wins.
  std::vector<bool> d = run(g, 1, 6, 0.010, 0.008);
  EXPECT_EQ(d, (std::vector<bool>{true, true, true, false, false, false}));
  EXPECT_DOUBLE_EQ(g.seconds_per_token(true, 1), 0.008);
  EXPECT_DOUBLE_EQ(g.seconds_per_token(false, 1), 0.010);
  // Plain decoding is probed every 16th step.
  d = run(g, 1, 48, 0.010, 0.008);
  std::vector<bool> want(48, true);
  want[15] = want[31] = want[47] = false;
  EXPECT_EQ(d, want);
}

TEST(SpeculationGovernor, TurnsSpeculationOffWhereItCostsMoreAndBackOnWhenItPays) {
  SpeculationGovernor g;
  // Verifying costs more than it saves: 12 ms a token with proposals, 10 without.
  run(g, 1, 6, 0.010, 0.012);
  std::vector<bool> d = run(g, 1, 64, 0.010, 0.012);
  EXPECT_EQ(count(d, true), 4);  // one probe in 16
  // The text turns repetitive (6 ms a token with proposals): the next probe sees it (a probe
  // weighs half the mean) and speculation runs from then on, plain decoding probed every 16th.
  d = run(g, 1, 96, 0.010, 0.006);
  EXPECT_EQ(count(std::vector<bool>(d.begin(), d.begin() + 15), true), 0);
  EXPECT_TRUE(d[15]);
  EXPECT_EQ(count(std::vector<bool>(d.begin() + 15, d.end()), false), 5);
  EXPECT_NEAR(g.seconds_per_token(true, 1), 0.006, 1e-6);
}

// A proposer that is costly to resume (a draft model) is not probed again once it has lost.
TEST(SpeculationGovernor, SpeculationThatLostIsNotProbedWhenCostlyToResume) {
  SpeculationGovernor g(/*probe_speculation=*/false);
  run(g, 1, 6, 0.010, 0.012);
  EXPECT_EQ(count(run(g, 1, 600, 0.010, 0.012), true), 0);
  // Where it wins, plain decoding is still probed (cheap).
  SpeculationGovernor h(/*probe_speculation=*/false);
  run(h, 1, 6, 0.010, 0.008);
  EXPECT_EQ(count(run(h, 1, 48, 0.010, 0.008), false), 3);
}

// A costly-to-resume proposer's first steps are averaged, not dominated by the first: one slow
// first step (a cold start, 60 ms) among 5-token steps of 30 ms reads 8 ms a token after three
// (at weight 0.05 from the first step on, ~11).
TEST(SpeculationGovernor, ACostlyToResumeProposersFirstStepsAreAveraged) {
  SpeculationGovernor g(/*probe_speculation=*/false);
  g.observe(true, 1, 5, 0.060);
  g.observe(true, 1, 5, 0.030);
  g.observe(true, 1, 5, 0.030);
  EXPECT_NEAR(g.seconds_per_token(true, 1), 0.120 / 15, 1e-9);
}

// Where a loss is for good (costly to resume), two all-rejected steps (a token each in 29 ms)
// among steps of 5 tokens in 30 ms do not turn speculation off against plain decoding at 7.2 ms
// a token; a lasting change does.
TEST(SpeculationGovernor, ACostlyToResumeProposerIsNotTurnedOffByAFewRejectedSteps) {
  SpeculationGovernor g(/*probe_speculation=*/false);
  run(g, 1, 6, 0.0072, 0.006);
  EXPECT_EQ(count(run(g, 1, 10, 0.0072, 0.006), true), 10);
  g.observe(true, 1, 1, 0.029);
  g.observe(true, 1, 1, 0.029);
  EXPECT_LT(g.seconds_per_token(true, 1), 0.0072);
  EXPECT_TRUE(g.should_propose(1));
  // Every step rejected from now on: the speculative arm drifts past plain decoding and stops.
  for (int i = 0; i < 40 && g.should_propose(1); ++i) g.observe(true, 1, 1, 0.029);
  EXPECT_FALSE(g.should_propose(1));
  // Where speculation is cheap to resume, the same two steps turn it off until the next probe.
  SpeculationGovernor h;
  run(h, 1, 16, 0.0072, 0.006);
  h.observe(true, 1, 1, 0.029);
  h.observe(true, 1, 1, 0.029);
  EXPECT_GT(h.seconds_per_token(true, 1), 0.0072);
}

TEST(SpeculationGovernor, DecidesEachBatchSizeApart) {
  SpeculationGovernor g;
  run(g, 1, 6, 0.010, 0.006);    // alone: speculation pays
  run(g, 16, 6, 0.002, 0.004);   // sixteen decoding: it does not
  run(g, 20, 10, 0.002, 0.004);  // the same bucket (16-31)
  EXPECT_TRUE(g.should_propose(1));
  EXPECT_FALSE(g.should_propose(16));
  EXPECT_FALSE(g.should_propose(31));
  EXPECT_TRUE(g.should_propose(2));  // 2-3: not measured yet, so speculation first
  // Nonsense reports are ignored.
  g.observe(true, 0, 5, 0.01);
  g.observe(true, 1, 0, 0.01);
  g.observe(true, 1, 5, -1);
  EXPECT_DOUBLE_EQ(g.seconds_per_token(true, 1), 0.006);
}

// Seconds per token are the arm's mean seconds over its mean tokens: one step whose proposals
// were all rejected (a verify step's time for one token) does not outweigh the steps that
// delivered four or five. (As a mean of each step's own seconds per token the speculative arm
// read 5.3 ms here, and plain decoding at 4 ms won; in fact speculation ran at 3.4 ms a token.)
TEST(SpeculationGovernor, ARejectedStepWeighsItsOneTokenNotItsRatio) {
  SpeculationGovernor g;
  const double steps[][2] = {{0.0088, 4}, {0.0118, 5}, {0.0117, 5}, {0.0107, 1}, {0.0107, 1}};
  for (int i = 0; i < SpeculationGovernor::kMinSamples; ++i) g.observe(false, 1, 1, 0.004);
  for (const auto& [seconds, tokens] : steps)
    g.observe(true, 1, static_cast<int64_t>(tokens), seconds);
  EXPECT_LT(g.seconds_per_token(true, 1), 0.0035);
  EXPECT_GT(g.seconds_per_token(true, 1), 0.003);
  EXPECT_TRUE(g.should_propose(1));
}

// A probe of speculation that found nothing to propose ran a plain step: the next step probes
// again, until one proposes.
TEST(SpeculationGovernor, AProbeThatProposedNothingIsTriedAgainNextStep) {
  SpeculationGovernor g;
  run(g, 1, 6, 0.010, 0.012);  // plain decoding wins
  std::vector<bool> d;
  for (int i = 0; i < 16; ++i) {
    d.push_back(g.should_propose(1));
    g.observe(false, 1, 1, 0.010);
  }
  EXPECT_EQ(d.back(), true);  // the 16th step probes, but nothing was proposed
  EXPECT_EQ(count(d, true), 1);
  EXPECT_TRUE(g.should_propose(1));  // so the next probes again
  g.observe(true, 1, 5, 0.060);      // and proposed: back to every 16th step
  EXPECT_FALSE(g.should_propose(1));
}

// A costly-to-resume proposer's catch-up on a sequence (a draft model's forward over its prompt)
// is paid once and earned back per token: it pays where the tokens left at the measured saving
// per token outweigh its rows at the measured seconds per caught-up row, twice over.
TEST(SpeculationGovernor, ACatchUpPaysWhereTheTokensLeftEarnItBack) {
  SpeculationGovernor g(/*probe_speculation=*/false);
  // Nothing measured: every catch-up is worth trying.
  EXPECT_TRUE(g.catch_up_pays(1, 700, 10));
  // 0.5 ms a caught-up row; a small catch-up (a decode-sized forward) is not counted.
  g.observe_catch_up(100, 0.050);
  g.observe_catch_up(SpeculationGovernor::kMinCatchUpRows - 1, 1.0);
  g.observe_catch_up(200, -1);
  EXPECT_TRUE(g.catch_up_pays(1, 700, 10));  // the arms are not measured yet
  // 8 ms a token with proposals, 10 without: 2 ms saved a token.
  run(g, 1, 6, 0.010, 0.008);
  // 700 rows cost 0.35 s: 360 tokens left earn 0.72 s, twice that; 340 earn 0.68.
  static_assert(SpeculationGovernor::kCatchUpPayback == 2);
  EXPECT_TRUE(g.catch_up_pays(1, 700, 360));
  EXPECT_FALSE(g.catch_up_pays(1, 700, 340));
  EXPECT_TRUE(g.catch_up_pays(1, 3, 2));  // a step's own catch-up: in the arms' times already
  EXPECT_TRUE(g.catch_up_pays(1, 0, 0));  // nothing to catch up
  // 2-3 sequences, a bucket not measured: judged by the nearest one that is (1 sequence).
  EXPECT_FALSE(g.catch_up_pays(2, 700, 340));
  EXPECT_TRUE(g.catch_up_pays(2, 700, 360));
  // Two steps whose proposals were all rejected (a token each in 30 ms) leave the speedup the
  // catch-up is judged by (taken at plain steps beside speculative ones) where it was: 42 rows
  // (21 ms, twice 42) still pay with 30 tokens left (60 ms).
  run(g, 1, 48, 0.010, 0.008);
  g.observe(true, 1, 1, 0.030);
  g.observe(true, 1, 1, 0.030);
  EXPECT_TRUE(g.catch_up_pays(1, 42, 30));
  EXPECT_FALSE(g.catch_up_pays(1, 42, 20));
}

// A costly-to-resume governor measured: 0.5 ms a caught-up row, then speculation and plain
// decoding at the given seconds per token.
void measure_draft(SpeculationGovernor& g, double plain_spt, double speculative_spt) {
  g.observe_catch_up(100, 0.050);
  run(g, 1, 6, plain_spt, speculative_spt);
}

// Steps that wanted proposals and got none (their sequences left out, at 20 ms a token: other
// work) move plain decoding's seconds per token, not the speedup (1.25): 0.02 x 0.2 = 4 ms a
// token saved, so 700 rows (0.35 s, twice 0.7) pay with 180 tokens left, not with 170 (taken as
// speedups, 20 / 8 ms, they would read 12 ms saved).
TEST(SpeculationGovernor, StepsWhoseSequencesWereLeftOutAreNoSpeedupSamples) {
  SpeculationGovernor g(/*probe_speculation=*/false);
  measure_draft(g, 0.010, 0.008);
  for (int i = 0; i < 40; ++i) {
    g.should_propose(1);
    g.observe(false, 1, 1, 0.020);
  }
  EXPECT_TRUE(g.catch_up_pays(1, 700, 180));
  EXPECT_FALSE(g.catch_up_pays(1, 700, 170));
}

// Where speculation saves nothing, no catch-up pays but one that costs no more than a probe.
TEST(SpeculationGovernor, WithoutASavingOnlyAProbeSizedCatchUpPays) {
  SpeculationGovernor h(/*probe_speculation=*/false);
  measure_draft(h, 0.010, 0.010);
  EXPECT_FALSE(h.catch_up_pays(1, 100, 50));
  EXPECT_FALSE(h.catch_up_pays(1, SpeculationGovernor::kMinCatchUpRows, 10));
  // Unless it costs no more than a probe: 100 rows (50 ms) against 100 tokens of plain decoding
  // left (1 s, 16 x 50 ms = 0.8 s), so a speedup that dipped is measured again.
  EXPECT_TRUE(h.catch_up_pays(1, 100, 100));
  // But a step's own catch-up on the tokens it accepted is not judged: speculation runs there
  // only while the running means favour it.
  EXPECT_TRUE(h.catch_up_pays(1, 1, 1));
  EXPECT_TRUE(h.catch_up_pays(1, SpeculationGovernor::kMinCatchUpRows - 1, 1));
}

}  // namespace
}  // namespace lm
