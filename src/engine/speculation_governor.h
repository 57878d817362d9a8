// SpeculationGovernor: whether a step's decoding sequences propose at all. Proposals pay when the
// tokens they add outweigh what verifying (and drafting) them costs, and that depends on the
// model, the machine, the proposer and the batch: a verified row is nearly free where a step is
// bound by reading the weights, and costs as much as a prompt token where it is bound by
// arithmetic (small models, few cores, large batches). So it is measured, not predicted: every
// pure decode step is timed in seconds per token it delivered, as one arm of a two-armed bandit
// per batch-size bucket -- steps that verified proposals, and steps that did not. The faster arm
// runs; the other is tried again every kProbeInterval steps of its bucket (a probe of
// speculation that found nothing to propose is tried again the next step), so a change of load
// or of text is seen -- except speculation by a proposer that is costly to resume (a draft model,
// whose first step after a pause catches up on every token it missed): once it has lost in a
// bucket it is not tried there again, and a sequence whose catch-up (its prompt, the first time)
// its tokens left would not pay back is left out (catch_up_pays). Plain data: it is fed seconds;
// it reads no clock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace lm {

class SpeculationGovernor {
 public:
  // `probe_speculation` false (a proposer that is not cheap_to_resume): once speculation has
  // lost in a bucket it is not tried there again; plain decoding is still probed where it lost.
  explicit SpeculationGovernor(bool probe_speculation = true)
      : probe_speculation_(probe_speculation) {}

  // Samples an arm needs before the buckets' comparison counts.
  static constexpr int64_t kMinSamples = 3;
  // The losing arm runs one step in this many (it costs at most 1/16 of the difference).
  static constexpr int64_t kProbeInterval = 16;
  // Weight of the newest step in an arm's running means: a running arm's samples come every step,
  // a probed arm's rarely, so one probe moves its mean further.
  static constexpr double kSmoothing = 0.2;
  static constexpr double kProbeSmoothing = 0.5;
  // The speculative arm's weight where speculation that lost is not tried again (a proposer
  // costly to resume): a loss is for good there, so it must not follow a few rejected steps. A
  // free chat drafted for at 87% acceptance (~5 tokens a step, plain decoding 7.2 ms a token) met
  // two all-rejected steps (a token each in ~29 ms): at 0.2 its mean went past plain decoding's
  // and the draft was off for the rest of the server's life; at 0.05 it stays ~6.3 ms. Until
  // 1 / 0.05 steps are in, the arm's plain mean (so its first step does not decide alone).
  static constexpr double kCostlyResumeSmoothing = 0.05;

  // Whether a step with `num_decoding` (> 0) decoding sequences should ask for proposals:
  // speculation first until it has kMinSamples, then plain decoding until it has as many, then
  // the arm with fewer seconds per token, but the other one every kProbeInterval-th step.
  bool should_propose(int64_t num_decoding);
  // A measured step that computed only decoding sequences' newest tokens (and proposals):
  // whether it verified any proposal, its decoding sequences, the tokens it delivered and its
  // seconds (schedule, drafting, forward, sampling, delivery).
  void observe(bool proposed, int64_t num_decoding, int64_t num_tokens, double seconds);

  // A proposer's catch-up of `rows` rows took `seconds`; catch-ups of fewer than
  // kMinCatchUpRows rows are not counted (a decode-sized forward's rows each cost far more than
  // a prompt's, as each reads all the weights).
  static constexpr int64_t kMinCatchUpRows = 32;
  void observe_catch_up(int64_t rows, double seconds);
  // How many times over a catch-up must be paid back. The saving per token is the bucket's,
  // not this sequence's own (a long prompt makes every step of it dearer, and the arms are
  // noisy), so a catch-up that merely breaks even by that estimate is all risk: the
  // default model drafting for its F16 copy on a 640-token prompt estimated 0.51 s saved
  // against a 0.51 s catch-up, then caught up in 0.59 s and saved 0.31 s.
  static constexpr double kCatchUpPayback = 2;
  // A draft model's catch-up on a new sequence (a forward over its whole prompt) is paid once,
  // where speculation's saving is earned per token. Whether a sequence that would catch up on
  // `rows` rows before it proposes, with at most `tokens_left` tokens to generate, pays that
  // back in a step of `num_decoding` sequences: tokens_left x plain decoding's seconds per token
  // x (1 - 1 / speculation's speedup) against kCatchUpPayback x rows x seconds per caught-up row.
  // The speedup is paired in time (see Bucket::speedup); the figures are those of the nearest
  // bucket that has measured them (a sequence left out where 4 decode must not catch up late
  // where 2 do, only because none did there yet). True for fewer than kMinCatchUpRows rows (a
  // step's own catch-up on the tokens it accepted, already in the speculative arm's times), while
  // nothing is measured, and for a catch-up that costs no more than a probe (1 / kProbeInterval
  // of the sequence's plain decoding left): so an estimate that dipped where speculation only
  // just won is measured again by the next short prompt instead of shutting it out for good.
  bool catch_up_pays(int64_t num_decoding, int64_t rows, int64_t tokens_left) const;

  // An arm's seconds per delivered token: its running mean of a step's seconds over that of its
  // tokens (0 before any sample), for tests.
  double seconds_per_token(bool proposed, int64_t num_decoding) const;

 private:
  // Running means of a step's seconds and of its tokens, kept apart: their ratio is the arm's
  // seconds per token. (A mean of each step's own ratio let one step whose proposals were all
  // rejected -- a verify step's time for one token -- outweigh the steps that delivered five, and
  // turned speculation off where it was paying: the default model on the code task, 2 threads.)
  struct Arm {
    double seconds_per_step = 0;
    double tokens_per_step = 0;
    int64_t num_observed = 0;
    double seconds_per_token() const {
      return tokens_per_step > 0 ? seconds_per_step / tokens_per_step : 0;
    }
  };
  struct Bucket {
    Arm plain, speculative;
    int64_t steps_since_probe = 0;
    bool probing = false;        // the last decision was a probe, not yet observed
    bool probe_arm = false;      // which arm it probed (true: speculative)
    bool decided_plain = false;  // the last decision was plain decoding
    // Speculation's speedup for the catch-up test: at each observed step decided plain (a probe,
    // the first measurements, or after speculation lost) within kProbeInterval observed plain
    // steps of a speculative one (mostly the same sequences, at about the same lengths), that
    // step's seconds per token over the speculative arm's; a running mean of those. (Not a step
    // that wanted proposals and got none: its sequences were left out, other work than the
    // speculative arm's.) The arms' own difference
    // compares different work when one of them stops (while every new sequence is left out,
    // plain decoding's mean follows the text and speculation's stays where it stopped: over a
    // run of the four tasks the free chat's 42-token prompt came to be left out), and their
    // running means swing with two rejected steps (a 2 ms saving a token read as 0.1 ms).
    int64_t steps_since_speculative = kProbeInterval + 1;
    double speedup = 0;
    int64_t num_speedups = 0;
  };
  // should_propose's decision for bucket b.
  bool decide(Bucket& b);
  // The bucket at `index`, else the nearest one with kMinSamples speedup samples (nullptr: none).
  const Bucket* nearest_measured_speedup(size_t index) const;
  // Decoding sequences 1, 2-3, 4-7, 8-15, 16-31, 32 and more.
  static size_t bucket_index(int64_t num_decoding);

  std::array<Bucket, 6> buckets_{};
  // Running mean of seconds per caught-up row (0 before any catch-up of kMinCatchUpRows).
  double catch_up_seconds_per_row_ = 0;
  bool probe_speculation_;
};

}  // namespace lm
