#include "server/text/stop_sequences.h"

#include <algorithm>

namespace lm {

StopSequenceMatcher::StopSequenceMatcher(std::vector<std::string> stops)
    : stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
  for (const auto& s : stops_) max_stop_length_ = std::max(max_stop_length_, s.size());
}

std::optional<std::string> StopSequenceMatcher::feed(std::string_view text) {
  if (stops_.empty()) return std::nullopt;
  const size_t old_size = window_.size();
  window_.append(text);
  // Only matches that end in the new text are new; earlier ones were already reported.
  for (const auto& stop : stops_) {
    const size_t from = old_size >= stop.size() - 1 ? old_size - (stop.size() - 1) : 0;
    if (window_.find(stop, from) != std::string::npos) return stop;
  }
  if (window_.size() > max_stop_length_) window_.erase(0, window_.size() - (max_stop_length_ - 1));
  return std::nullopt;
}

size_t StopSequenceMatcher::pending_prefix_length() const {
  size_t best = 0;
  for (const auto& stop : stops_) {
    for (size_t len = std::min(stop.size() - 1, window_.size()); len > best; --len) {
      if (window_.compare(window_.size() - len, len, stop, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

}  // namespace lm
