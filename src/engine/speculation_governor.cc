#include "engine/speculation_governor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>

namespace lm {

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
  const auto mean = [&](double& running, double value) {
    running = arm.num_observed == 0 ? value : (1 - weight) * running + weight * value;
  };
  mean(arm.seconds_per_step, seconds);
  mean(arm.tokens_per_step, static_cast<double>(num_tokens));
  ++arm.num_observed;
  const bool decided_plain = b.decided_plain;
  b.decided_plain = false;  // read once: a step observed without a decision is no sample
  if (proposed) {
    b.steps_since_speculative = 0;
  } else if (++b.steps_since_speculative <= kProbeInterval && decided_plain && seconds > 0 &&
             b.speculative.seconds_per_token() > 0) {
    const double sample =
        seconds / static_cast<double>(num_tokens) / b.speculative.seconds_per_token();
    b.speedup = b.num_speedups == 0 ? sample : (1 - kSmoothing) * b.speedup + kSmoothing * sample;
    ++b.num_speedups;
  }
}

void SpeculationGovernor::observe_catch_up(int64_t rows, double seconds) {
  if (rows < kMinCatchUpRows || !std::isfinite(seconds) || seconds <= 0) return;
  const double per_row = seconds / static_cast<double>(rows);
  catch_up_seconds_per_row_ =
      catch_up_seconds_per_row_ == 0
          ? per_row
          : (1 - kSmoothing) * catch_up_seconds_per_row_ + kSmoothing * per_row;
}

bool SpeculationGovernor::catch_up_pays(int64_t num_decoding, int64_t rows,
                                        int64_t tokens_left) const {
  if (rows < kMinCatchUpRows || catch_up_seconds_per_row_ == 0) return true;
  const auto measured = [](const Bucket& b) { return b.num_speedups >= kMinSamples; };
  // The bucket itself, then those 1, 2, ... away (the smaller first).
  const auto at = static_cast<int64_t>(bucket_index(num_decoding));
  const Bucket* b = nullptr;
  for (int64_t d = 0; b == nullptr && d < std::ssize(buckets_); ++d) {
    for (const int64_t i : {at - d, at + d}) {
      if (b == nullptr && i >= 0 && i < std::ssize(buckets_) &&
          measured(buckets_[static_cast<size_t>(i)]))
        b = &buckets_[static_cast<size_t>(i)];
    }
  }
  if (b == nullptr) return true;
  const double plain_left = static_cast<double>(tokens_left) * b->plain.seconds_per_token();
  const double cost = static_cast<double>(rows) * catch_up_seconds_per_row_;
  if (cost * static_cast<double>(kProbeInterval) <= plain_left) return true;  // a probe's cost
  const double saved_fraction = b->speedup > 1 ? 1 - 1 / b->speedup : 0;
  return plain_left * saved_fraction > kCatchUpPayback * cost;
}

double SpeculationGovernor::seconds_per_token(bool proposed, int64_t num_decoding) const {
  const Bucket& b = buckets_[bucket_index(num_decoding)];
  return (proposed ? b.speculative : b.plain).seconds_per_token();
}

}  // namespace lm
