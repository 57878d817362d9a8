// Stop sequences matched on generated text, across token boundaries: text is fed as it is
// detokenized, and a match is reported as soon as any stop string is complete. TGI keeps the
// stop text in the output; callers decide what to show.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lm {

class StopSequenceMatcher {
 public:
  explicit StopSequenceMatcher(std::vector<std::string> stops);

  // Appends generated text; returns the stop string that now ends a match, if any.
  std::optional<std::string> feed(std::string_view text);

  // The longest tail of the text so far that could still begin a stop string (so a streaming
  // caller can hold it back until it is ruled out).
  size_t pending_prefix_length() const;

 private:
  std::vector<std::string> stops_;
  size_t max_stop_length_ = 0;
  std::string window_;  // the last max_stop_length_ - 1 + new bytes of text
};

}  // namespace lm
