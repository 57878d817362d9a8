// The paired decode roofline's record of one benchmark run: after each step that only decoded, a
// read pass of memory, and that step's fraction of the bandwidth the pass measured. Filled on the
// engine thread (its step observer) and read once Engine::drain() has joined that thread.
#pragma once

#include <chrono>
#include <vector>

namespace lm {

struct PairedRoofline {
  using Clock = std::chrono::steady_clock;
  struct Pass {
    Clock::time_point start, end;  // the read pass, after its step's tokens were delivered
    double bytes_per_second = 0;   // what the pass read
    double fraction = 0;           // the step's bytes / its seconds / bytes_per_second
  };
  std::vector<Pass> passes;

  // The passes that started at or after `from`: decode's, when `from` is the time the last
  // request got its first token (passes start only once every request has one).
  std::vector<Pass> after(Clock::time_point from) const {
    std::vector<Pass> out;
    for (const Pass& p : passes)
      if (p.start >= from) out.push_back(p);
    return out;
  }
  // The seconds of the passes that lie wholly within [from, to]: between decode's first and last
  // token, they are time the decode phase did not spend decoding (the last step's pass runs after
  // its token, outside it).
  double seconds_within(Clock::time_point from, Clock::time_point to) const {
    double total = 0;
    for (const Pass& p : passes)
      if (p.start >= from && p.end <= to)
        total += std::chrono::duration<double>(p.end - p.start).count();
    return total;
  }
};

}  // namespace lm
