#include "server/metrics/metrics.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace lm {
namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::abs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

std::string series(const std::string& name, const std::string& label,
                   const std::string& extra = "") {
  std::string labels = label;
  if (!extra.empty()) labels += (labels.empty() ? "" : ",") + extra;
  return labels.empty() ? name : name + "{" + labels + "}";
}

}  // namespace

std::vector<double> Metrics::duration_buckets() {
  // Multiplied step by step as TGI does, so that the `le` labels are TGI's to the last bit.
  std::vector<double> b;
  double bound = 0.0001;
  for (int k = 1; k <= 35; ++k) b.push_back(bound *= 1.5);
  return b;
}

std::vector<double> Metrics::linear_buckets(double max, int count) {
  std::vector<double> b;
  for (int i = 1; i <= count; ++i) b.push_back(max / count * i);
  return b;
}

void Metrics::describe(const std::string& name, const std::string& help) {
  std::lock_guard<std::mutex> lock(mutex_);
  help_.emplace(name, help);  // the first description wins, as in TGI's exporter
}

void Metrics::set_buckets(const std::string& name, std::vector<double> bounds) {
  std::lock_guard<std::mutex> lock(mutex_);
  bounds_[name] = std::move(bounds);
}

void Metrics::set_summary(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  summary_names_.insert(name);
}

void Metrics::increment(const std::string& name, const std::string& label, double by) {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_[name][label] += by;
}

void Metrics::set_gauge(const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  gauges_[name] = value;
}

void Metrics::set_counter(const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_[name][""] = value;
}

void Metrics::add_gauge(const std::string& name, double delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  gauges_[name] += delta;
}

void Metrics::observe(const std::string& name, double value, const std::string& label,
                      uint64_t times) {
  if (times == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const double total = value * static_cast<double>(times);
  if (summary_names_.contains(name)) {
    Summary& s = summaries_[name][label];
    s.counts[value] += times;
    s.count += times;
    s.sum += total;
    return;
  }
  auto b = bounds_.find(name);
  LM_CHECK_MSG(b != bounds_.end(), "histogram observed before set_buckets");
  Histogram& h = histograms_[name][label];
  if (h.counts.empty()) h.counts.assign(b->second.size(), 0);
  for (size_t i = 0; i < b->second.size(); ++i) {
    if (value <= b->second[i]) {
      h.counts[i] += times;
      break;
    }
  }
  h.count += times;
  h.sum += total;
}

double Metrics::value(const std::string& name, const std::string& label) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto c = counters_.find(name); c != counters_.end()) {
    auto it = c->second.find(label);
    return it == c->second.end() ? 0 : it->second;
  }
  if (auto g = gauges_.find(name); g != gauges_.end()) return g->second;
  return 0;
}

void Metrics::set_prefix_labels(const std::string& prefix, const std::string& labels) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [known, known_labels] : prefix_labels_) {
    if (known == prefix) {
      known_labels = labels;
      return;
    }
  }
  prefix_labels_.emplace_back(prefix, labels);
}

std::string Metrics::label_pair(const std::string& key, const std::string& value) {
  std::string out = key + "=\"";
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Metrics::labels_of(const std::string& name, const std::string& label) const {
  for (const auto& [prefix, labels] : prefix_labels_) {
    if (name.starts_with(prefix)) return label.empty() ? labels : labels + "," + label;
  }
  return label;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  auto header = [&](const std::string& name, const char* type) {
    if (auto h = help_.find(name); h != help_.end())
      out += "# HELP " + name + " " + h->second + "\n";
    out += "# TYPE " + name + " " + type + "\n";
  };
  for (const auto& [name, by_label] : counters_) {
    header(name, "counter");
    for (const auto& [label, v] : by_label)
      out += series(name, labels_of(name, label)) + " " + number(v) + "\n";
    out += "\n";
  }
  for (const auto& [name, v] : gauges_) {
    header(name, "gauge");
    out += series(name, labels_of(name, "")) + " " + number(v) + "\n\n";
  }
  for (const auto& [name, by_label] : histograms_) {
    header(name, "histogram");
    const auto& bounds = bounds_.at(name);
    for (const auto& [own_label, h] : by_label) {
      const std::string label = labels_of(name, own_label);
      uint64_t cumulative = 0;
      for (size_t i = 0; i < bounds.size(); ++i) {
        cumulative += h.counts[i];
        out += series(name + "_bucket", label, "le=\"" + number(bounds[i]) + "\"") + " " +
               std::to_string(cumulative) + "\n";
      }
      out += series(name + "_bucket", label, "le=\"+Inf\"") + " " + std::to_string(h.count) + "\n";
      out += series(name + "_sum", label) + " " + number(h.sum) + "\n";
      out += series(name + "_count", label) + " " + std::to_string(h.count) + "\n";
    }
    out += "\n";
  }
  render_summaries(out);
  return out;
}

void Metrics::render_summaries(std::string& out) const {
  for (const auto& [name, by_label] : summaries_) {
    if (auto h = help_.find(name); h != help_.end())
      out += "# HELP " + name + " " + h->second + "\n";
    out += "# TYPE " + name + " summary\n";
    for (const auto& [own_label, s] : by_label) {
      const std::string label = labels_of(name, own_label);
      for (double q : {0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0}) {
        // Nearest rank: the smallest value with at least ceil(q * count) observations at or below.
        const auto rank = std::max<uint64_t>(
            1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(s.count))));
        uint64_t seen = 0;
        double v = 0;
        for (const auto& [value, n] : s.counts) {
          v = value;
          if ((seen += n) >= rank) break;
        }
        out += series(name, label, "quantile=\"" + number(q) + "\"") + " " + number(v) + "\n";
      }
      out += series(name + "_sum", label) + " " + number(s.sum) + "\n";
      out += series(name + "_count", label) + " " + std::to_string(s.count) + "\n";
    }
    out += "\n";
  }
}

}  // namespace lm
