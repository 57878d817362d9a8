// A compiled PCRE2 pattern (UTF + UCP, JIT when available) for the pre-tokenizer split regexes
// of tokenizer.json (Oniguruma syntax, which PCRE2 accepts for these patterns, look-ahead
// included). Immutable after compile; find_all allocates its own match state, so concurrent use is
// safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace lm {

class Regex {
 public:
  static Result<std::unique_ptr<Regex>> compile(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping matches, left to right, as [begin, end) byte offsets into text (valid UTF-8).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so pcre2.h stays out of headers
};

}  // namespace lm
