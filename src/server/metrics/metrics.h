// A small Prometheus registry with TGI's exposition rules: counters without a _total suffix,
// series that appear only after their first recording, histograms with fixed buckets (or, with
// none, summaries), one own label per labelled series (after its family's prefix labels).
// Thread-safe (HTTP threads and the engine thread record concurrently).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace lm {

class Metrics {
 public:
  // Buckets TGI configures: durations are 35 geometric bounds 0.0001 * 1.5^k (k = 1..35); `max`
  // / 100 steps for token counts.
  static std::vector<double> duration_buckets();
  static std::vector<double> linear_buckets(double max, int count = 100);

  void describe(const std::string& name, const std::string& help);
  // Histograms need their buckets declared once before observe().
  void set_buckets(const std::string& name, std::vector<double> bounds);
  // A histogram TGI gives no buckets, which its exporter renders as a summary: quantiles 0, 0.5,
  // 0.9, 0.95, 0.99, 0.999 and 1 (here over every value since start, not a rolling window), _sum
  // and _count. NOTE: values are kept as a count per distinct value: for small integer counts.
  void set_summary(const std::string& name);

  // `label` is "" or one `key="value"` pair, e.g. `err="validation"`.
  void increment(const std::string& name, const std::string& label = "", double by = 1);
  void set_gauge(const std::string& name, double value);
  // For counters kept elsewhere (the engine's totals): publishes their current value.
  void set_counter(const std::string& name, double value);
  void add_gauge(const std::string& name, double delta);
  // `times` records the same value that many times under one lock (one per token of a step).
  void observe(const std::string& name, double value, const std::string& label = "",
               uint64_t times = 1);

  // Labels that every series of the metrics whose names start with `prefix` carries before its
  // own (vLLM's model_name on the vllm: families, which its dashboards and PromQL recipes select
  // on); a second call for the same prefix replaces them. `labels`: label_pair()s joined by
  // commas. Rendering only: increment, observe and value take and find a series by its own label
  // as before.
  void set_prefix_labels(const std::string& prefix, const std::string& labels);
  // key="value" with the value escaped as the exposition format requires (\\, \", \n).
  static std::string label_pair(const std::string& key, const std::string& value);

  // Prometheus text exposition (version 0.0.4).
  std::string render() const;
  // For tests: the current value of a counter or gauge series (0 when absent).
  double value(const std::string& name, const std::string& label = "") const;

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // per bound, non-cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  struct Summary {
    std::map<double, uint64_t> counts;  // value -> times observed
    uint64_t count = 0;
    double sum = 0;
  };
  void render_summaries(std::string& out) const;
  // `label` with the prefix labels of `name` before it. Called with mutex_ held (render).
  std::string labels_of(const std::string& name, const std::string& label) const;
  mutable std::mutex mutex_;
  std::map<std::string, std::string> help_;
  std::map<std::string, std::vector<double>> bounds_;
  std::map<std::string, std::map<std::string, double>> counters_;  // name -> label -> value
  std::map<std::string, double> gauges_;
  std::map<std::string, std::map<std::string, Histogram>> histograms_;
  std::set<std::string> summary_names_;
  std::map<std::string, std::map<std::string, Summary>> summaries_;
  std::vector<std::pair<std::string, std::string>> prefix_labels_;  // prefix -> labels
};

}  // namespace lm
