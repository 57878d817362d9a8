// The text an OpenAI route shows for one choice: stop strings are matched on the text (across
// token boundaries) and excluded, and any tail that could still begin a stop string is held back
// until it is ruled out, so no part of a stop string is ever streamed. Not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lm {

class StopTextFilter {
 public:
  explicit StopTextFilter(std::vector<std::string> stops);

  struct Output {
    std::string text;      // newly released text (never part of a stop string)
    bool stopped = false;  // a stop string completed; nothing more is released after it
  };
  // Adds generated text (complete UTF-8 characters).
  Output push(std::string_view text);
  // The sequence ended without a stop string: releases what was held back.
  std::string finish();

  // All text released so far.
  const std::string& released() const { return released_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // text not yet released: the possible beginning of a stop string
  std::string released_;
  bool stopped_ = false;
};

}  // namespace lm
