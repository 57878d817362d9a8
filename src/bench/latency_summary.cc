#include "bench/latency_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace lm {

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  // Nearest rank: the smallest sample with at least q% of the samples at or below it.
  const auto rank = static_cast<size_t>(std::ceil(q / 100.0 * static_cast<double>(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

LatencySummary summarize(const std::vector<double>& samples) {
  LatencySummary s;
  if (samples.empty()) return s;
  s.count = static_cast<int>(samples.size());
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / s.count;
  s.min = *std::min_element(samples.begin(), samples.end());
  s.max = *std::max_element(samples.begin(), samples.end());
  s.p50 = percentile(samples, 50);
  s.p90 = percentile(samples, 90);
  s.p99 = percentile(samples, 99);
  return s;
}

}  // namespace lm
