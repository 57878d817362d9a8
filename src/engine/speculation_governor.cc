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
  ++b.num_steps;
  if (b.speculative.num_observed < kMinSamples) return true;
  if (b.plain.num_observed < kMinSamples) return false;
  const bool speculation_wins = b.speculative.seconds_per_token <= b.plain.seconds_per_token;
  const bool probe = b.num_steps % kProbeInterval == 0;
  return speculation_wins != probe;
}

void SpeculationGovernor::observe(bool proposed, int64_t num_decoding, int64_t num_tokens,
                                  double seconds) {
  if (num_decoding < 1 || num_tokens < 1 || !std::isfinite(seconds) || seconds < 0) return;
  Bucket& b = buckets_[bucket_index(num_decoding)];
  Arm& arm = proposed ? b.speculative : b.plain;
  const double sample = seconds / static_cast<double>(num_tokens);
  arm.seconds_per_token = arm.num_observed == 0
                              ? sample
                              : (1 - kSmoothing) * arm.seconds_per_token + kSmoothing * sample;
  ++arm.num_observed;
}

double SpeculationGovernor::seconds_per_token(bool proposed, int64_t num_decoding) const {
  const Bucket& b = buckets_[bucket_index(num_decoding)];
  return (proposed ? b.speculative : b.plain).seconds_per_token;
}

}  // namespace lm
