#include "base/owned_ranges.h"

#include <algorithm>

#include "base/check.h"

namespace lm {
namespace {

uint64_t pack(int64_t front, int64_t back) {
  return static_cast<uint64_t>(front) | (static_cast<uint64_t>(back) << 32);
}
int64_t front_of(uint64_t v) { return static_cast<int64_t>(v & 0xffffffffu); }
int64_t back_of(uint64_t v) { return static_cast<int64_t>(v >> 32); }

}  // namespace

OwnedRanges::OwnedRanges(int64_t n, int num_threads, int64_t piece)
    : num_threads_(std::max(1, num_threads)),
      piece_(std::max<int64_t>(1, piece)),
      ranges_(new Range[static_cast<size_t>(num_threads_)]) {
  LM_CHECK(n >= 0 && n < (int64_t{1} << 32));
  for (int t = 0; t < num_threads_; ++t) {
    ranges_[t].front_back.store(pack(n * t / num_threads_, n * (t + 1) / num_threads_),
                                std::memory_order_relaxed);
  }
}

bool OwnedRanges::take_front(Range& r, int64_t* begin, int64_t* end) const {
  uint64_t v = r.front_back.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t front = front_of(v), back = back_of(v);
    if (front >= back) return false;
    const int64_t next = std::min(back, front + piece_);
    if (r.front_back.compare_exchange_weak(v, pack(next, back), std::memory_order_relaxed)) {
      *begin = front;
      *end = next;
      return true;
    }
  }
}

bool OwnedRanges::take_back(Range& r, int64_t* begin, int64_t* end) const {
  uint64_t v = r.front_back.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t front = front_of(v), back = back_of(v);
    if (front >= back) return false;
    const int64_t next = std::max(front, back - piece_);
    if (r.front_back.compare_exchange_weak(v, pack(front, next), std::memory_order_relaxed)) {
      *begin = next;
      *end = back;
      return true;
    }
  }
}

bool OwnedRanges::claim(int thread, int64_t* begin, int64_t* end) {
  LM_CHECK(thread >= 0 && thread < num_threads_);
  if (take_front(ranges_[thread], begin, end)) return true;
  for (int i = 1; i < num_threads_; ++i) {
    if (take_back(ranges_[(thread + i) % num_threads_], begin, end)) return true;
  }
  return false;
}

}  // namespace lm
