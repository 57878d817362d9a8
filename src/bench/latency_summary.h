// Summary statistics of repeated measurements, as TGI's text-generation-benchmark reports them:
// mean, min, max and the 50th/90th/99th percentiles (nearest-rank on the sorted samples).
#pragma once

#include <vector>

namespace lm {

struct LatencySummary {
  int count = 0;
  double mean = 0, min = 0, max = 0, p50 = 0, p90 = 0, p99 = 0;
};

// The nearest-rank percentile q (0-100] of `samples`; 0 for no samples.
double percentile(std::vector<double> samples, double q);

LatencySummary summarize(const std::vector<double>& samples);

}  // namespace lm
