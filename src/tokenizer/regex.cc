#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/check.h"

namespace lm {

Result<std::unique_ptr<Regex>> Regex::compile(const std::string& pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return Error{"cannot compile the tokenizer regex '" + pattern + "' at offset " +
                 std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message)};
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // best effort: falls back to the interpreter
  std::unique_ptr<Regex> regex(new Regex());
  regex->pattern_ = pattern;
  regex->code_ = code;
  return regex;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

namespace {

// Per-thread match state, reused across calls and patterns: creating a JIT stack costs an mmap,
// which dominated encoding when done per piece. One ovector pair suffices (whole-match offsets).
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  // Large enough for long whitespace runs (the default JIT stack is 32 KiB).
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  MatchState() {
    LM_CHECK(data != nullptr && context != nullptr);
    if (stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchState() {
    if (stack != nullptr) pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

}  // namespace

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  auto* code = static_cast<pcre2_code*>(code_);
  thread_local MatchState state;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset <= text.size()) {
    // rc == 0 means the ovector was too small for the capture groups; the match itself is set.
    const int rc = pcre2_match(code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, state.data,
                               state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // A pattern that backtracks past PCRE2's match, depth, heap or JIT stack limit on this text
    // (a hostile tokenizer.json's, e.g. "(a|aa)+$"): the rest of the text is left unmatched, so
    // the request still tokenizes (validly, though not as HF would) instead of failing a CHECK.
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      break;
    }
    LM_CHECK_MSG(rc >= 0, "pcre2_match failed on valid UTF-8 input");
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {  // empty match: skip one character so the scan advances
      if (begin >= text.size()) break;
      offset = begin + 1;
      while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) {
        ++offset;
      }
      continue;
    }
    matches.emplace_back(begin, end);
    offset = end;
  }
  return matches;
}

}  // namespace lm
