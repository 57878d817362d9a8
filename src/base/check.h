// Invariant checks. A failed LM_CHECK is a bug in this program (not bad input), so it aborts
// with file:line. Expected failures (bad files, bad requests) are Result<T> values instead.
#pragma once

namespace lm::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* expr, const char* message);
}  // namespace lm::detail

#define LM_CHECK(cond)                                                      \
  do {                                                                      \
    if (!(cond)) ::lm::detail::check_failed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define LM_CHECK_MSG(cond, message)                                              \
  do {                                                                           \
    if (!(cond)) ::lm::detail::check_failed(__FILE__, __LINE__, #cond, message); \
  } while (0)
