#include "server/text/stop_text_filter.h"

#include <algorithm>

namespace lm {
namespace {

// Length of the longest tail of `text` that is a proper prefix of some stop string.
size_t longest_stop_prefix_tail(std::string_view text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const auto& stop : stops) {
    for (size_t len = std::min(stop.size() - 1, text.size()); len > best; --len) {
      if (text.compare(text.size() - len, len, stop, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

// Moves `cut` back to a UTF-8 character boundary of `text`.
size_t char_boundary(std::string_view text, size_t cut) {
  while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  return cut;
}

}  // namespace

StopTextFilter::StopTextFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

StopTextFilter::Output StopTextFilter::push(std::string_view text) {
  Output out;
  if (stopped_) {
    out.stopped = true;
    return out;
  }
  pending_.append(text);
  // Released text can hold no start of a match, so every match starts inside pending_; the
  // earliest one wins.
  size_t first = std::string::npos;
  for (const auto& stop : stops_) first = std::min(first, pending_.find(stop));
  if (first != std::string::npos) {
    out.text = pending_.substr(0, first);
    out.stopped = stopped_ = true;
    pending_.clear();
  } else {
    const size_t keep = longest_stop_prefix_tail(pending_, stops_);
    const size_t cut = char_boundary(pending_, pending_.size() - keep);
    out.text = pending_.substr(0, cut);
    pending_.erase(0, cut);
  }
  released_ += out.text;
  return out;
}

std::string StopTextFilter::finish() {
  std::string out = stopped_ ? std::string() : std::move(pending_);
  pending_.clear();
  released_ += out;
  return out;
}

}  // namespace lm
