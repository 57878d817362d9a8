#include "engine/speculation_governor.h"

#include <bit>
#include <cmath>

namespace lm {

size_t SpeculationGovernor::bucket_index(int64_t num_decoding) {
  const auto n = static_cast<uint64_t>(num_decoding < 1 ? 1 : num_decoding);
  const auto log2 = static_cast<size_t>(std::bit_width(n) - 1);  // 1 -> 0, 2-3 -> 1, ...
  return log2 < 5 ? log2 : 5;
}

bool SpeculationGovernor::should_propose(int64_t num_decoding) {
  Bucket& b = buckets_[bucket_index(num_decoding)];
  if (b.speculative.num_observed < kMinSamples) return true;
  if (b.plain.num_observed < kMinSamples) return false;
  const bool speculation_wins = b.speculative.seconds_per_token <= b.plain.seconds_per_token;
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
  b.probing = false;
  Arm& arm = proposed ? b.speculative : b.plain;
  const double sample = seconds / static_cast<double>(num_tokens);
  const double weight = probe ? kProbeSmoothing : kSmoothing;
  arm.seconds_per_token =
      arm.num_observed == 0 ? sample : (1 - weight) * arm.seconds_per_token + weight * sample;
  ++arm.num_observed;
}

double SpeculationGovernor::seconds_per_token(bool proposed, int64_t num_decoding) const {
  const Bucket& b = buckets_[bucket_index(num_decoding)];
  return (proposed ? b.speculative : b.plain).seconds_per_token;
}

}  // namespace lm
