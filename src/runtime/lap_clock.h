// The executors' step phases timed back to back (ExecuteTimings): each call returns the seconds
// since the previous one and starts the next lap.
#pragma once

#include <chrono>

namespace lm {

inline double seconds_since(std::chrono::steady_clock::time_point& last) {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - last).count();
  last = now;
  return seconds;
}

}  // namespace lm
