#include "engine/speculation_governor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>

namespace lm {
namespace {

// A running mean's next value: the first sample as it is, then `weight` of each new one.
double smoothed(double running, double value, double weight, bool first) {
  return first ? value : (1 - weight) * running + weight * value;
}

}  // namespace

size_t SpeculationGovernor::bucket_index(int64_t num_decoding) {
  const auto n = static_cast<uint64_t>(num_decoding < 1 ? 1 : num_decoding);
  const auto log2 = static_cast<size_t>(std::bit_width(n) - 1);  // 1 -> 0, 2-3 -> 1, ...
  return log2 < 5 ? log2 : 5;
}

bool SpeculationGovernor::should_propose(int64_t num_decoding) {
  Bucket& b = buckets_[bucket_index(num_decoding)];
  const bool propose = decide(b);
  b.decided_plain = !propose;
  return propose;
}

bool SpeculationGovernor::decide(Bucket& b) {
  if (b.speculative.num_observed < kMinSamples) return true;
  if (b.plain.num_observed < kMinSamples) return false;
  const bool speculation_wins = b.speculative.seconds_per_token() <= b.plain.seconds_per_token();
  if (!speculation_wins && !probe_speculation_) return false;
  if (++b.steps_since_probe < kProbeInterval) return speculation_wins;
  b.steps_since_probe = 0;
  b.probing = true;
  b.probe_arm = !speculation_wins;
  return !speculation_wins;
}

void SpeculationGovernor::observe(bool proposed, int64_t num_decoding, int64_t num_tokens,
                                  double seconds) {
  if (num_decoding < 1 || num_tokens < 1 || !std::isfinite(seconds) || seconds < 0) return;
  Bucket& b = buckets_[bucket_index(num_decoding)];
  const bool probe = b.probing && proposed == b.probe_arm;
  // A probe of speculation whose sequences found nothing to propose ran a plain step: it
  // measured nothing, so the next step probes again (free while nothing is proposed).
  if (b.probing && b.probe_arm && !proposed) b.steps_since_probe = kProbeInterval - 1;
  b.probing = false;
  Arm& arm = proposed ? b.speculative : b.plain;
  const double weight =
      probe ? kProbeSmoothing
      : proposed && !probe_speculation_
          ? std::max(kCostlyResumeSmoothing, 1.0 / static_cast<double>(arm.num_observed + 1))
          : kSmoothing;
  const bool first = arm.num_observed == 0;
  arm.seconds_per_step = smoothed(arm.seconds_per_step, seconds, weight, first);
  arm.tokens_per_step =
      smoothed(arm.tokens_per_step, static_cast<double>(num_tokens), weight, first);
  ++arm.num_observed;
  const bool decided_plain = b.decided_plain;
  b.decided_plain = false;  // read once: a step observed without a decision is no sample
  if (proposed) {
    b.steps_since_speculative = 0;
  } else if (++b.steps_since_speculative <= kProbeInterval && decided_plain && seconds > 0 &&
             b.speculative.seconds_per_token() > 0) {
    const double sample =
        seconds / static_cast<double>(num_tokens) / b.speculative.seconds_per_token();
    b.speedup = smoothed(b.speedup, sample, kSmoothing, b.num_speedups == 0);
    ++b.num_speedups;
  }
}

void SpeculationGovernor::observe_catch_up(int64_t rows, double seconds) {
  if (rows < kMinCatchUpRows || !std::isfinite(seconds) || seconds <= 0) return;
  catch_up_seconds_per_row_ =
      smoothed(catch_up_seconds_per_row_, seconds / static_cast<double>(rows), kSmoothing,
               catch_up_seconds_per_row_ == 0);
}

bool SpeculationGovernor::catch_up_pays(int64_t num_decoding, int64_t rows,
                                        int64_t tokens_left) const {
  if (rows < kMinCatchUpRows || catch_up_seconds_per_row_ == 0) return true;
  const Bucket* b = nearest_measured_speedup(bucket_index(num_decoding));
  if (b == nullptr) return true;
  const double plain_left = static_cast<double>(tokens_left) * b->plain.seconds_per_token();
  const double cost = static_cast<double>(rows) * catch_up_seconds_per_row_;
  if (cost * static_cast<double>(kProbeInterval) <= plain_left) return true;  // a probe's cost
  const double saved_fraction = b->speedup > 1 ? 1 - 1 / b->speedup : 0;
  return plain_left * saved_fraction > kCatchUpPayback * cost;
}

const SpeculationGovernor::Bucket* SpeculationGovernor::nearest_measured_speedup(
    size_t index) const {
  // The bucket itself, then those 1, 2, ... away (the smaller first).
  const auto at = static_cast<int64_t>(index);
  for (int64_t d = 0; d < std::ssize(buckets_); ++d) {
    for (const int64_t i : {at - d, at + d}) {
      if (i >= 0 && i < std::ssize(buckets_) &&
          buckets_[static_cast<size_t>(i)].num_speedups >= kMinSamples)
        return &buckets_[static_cast<size_t>(i)];
    }
  }
  return nullptr;
}

double SpeculationGovernor::seconds_per_token(bool proposed, int64_t num_decoding) const {
  const Bucket& b = buckets_[bucket_index(num_decoding)];
  return (proposed ? b.speculative : b.plain).seconds_per_token();
}

}  // namespace lm
