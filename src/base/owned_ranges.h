// Work split for data-parallel loops whose threads may start late or run at different speeds:
// [0, n) is cut into one contiguous range per thread; a thread claims small pieces from the
// front of its own range and, once that is empty, from the back of the others'. Each thread
// thus streams one long run of memory (hardware prefetchers and our software prefetch stay on
// the data it will use next), while the end of the loop is balanced to within one piece. A
// single shared counter (pieces dealt in turn) balances as well but interleaves the threads'
// pieces, so every piece starts a new stream and read-ahead lands in the other thread's data.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace lm {

class OwnedRanges {
 public:
  // Pieces of at most `piece` indices (>= 1) over [0, n), for num_threads threads.
  OwnedRanges(int64_t n, int num_threads, int64_t piece);

  // Next piece for thread `thread`: its own front first, then the back of another's range.
  // False when nothing is left anywhere. Each index is handed out exactly once.
  bool claim(int thread, int64_t* begin, int64_t* end);

 private:
  // One per thread, on its own cache line: front (low 32 bits) and back (high 32 bits) of what
  // is left of the range, updated together by compare-and-swap.
  struct alignas(64) Range {
    std::atomic<uint64_t> front_back{0};
  };
  bool take_front(Range& r, int64_t* begin, int64_t* end) const;
  bool take_back(Range& r, int64_t* begin, int64_t* end) const;

  int num_threads_;
  int64_t piece_;
  std::unique_ptr<Range[]> ranges_;
};

}  // namespace lm
