#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace lm::detail {

void check_failed(const char* file, int line, const char* expr, const char* message) {
  std::fprintf(stderr, "%s:%d: check failed: %s %s\n", file, line, expr, message);
  std::fflush(stderr);
  std::abort();
}

}  // namespace lm::detail
