// Window-bounded K/V: when every layer of a model attends through a sliding window of at most
// `window` tokens (a query at position p reads positions [p - window + 1, p]), the blocks that lie
// wholly before the window of a sequence's next position are never read again. These functions
// say which ones; the Scheduler releases them and leaves block 0 (reserved, never handed out) in
// their table entries as a placeholder the attention never reads.
#pragma once

#include <algorithm>
#include <cstdint>

namespace lm {

// The block id left in a table entry whose block was released.
inline constexpr int32_t kPlaceholderBlock = 0;

// Leading blocks of a sequence no query from `next_position` on can read: those wholly before
// next_position - window + 1. 0 when window is 0 (no window: every block stays).
inline int64_t num_blocks_before_window(int64_t window, int64_t block_size, int64_t next_position) {
  if (window <= 0) return 0;
  return std::max<int64_t>(0, next_position - window + 1) / block_size;
}

// The most blocks `num_positions` consecutive positions can touch, however they align with the
// block boundaries: a sequence computing one token at position p holds the blocks of
// [p - window + 1, p], at most max_blocks_spanned(window, block_size) of them.
inline int64_t max_blocks_spanned(int64_t num_positions, int64_t block_size) {
  if (num_positions <= 0) return 0;
  return (num_positions - 1 + block_size - 1) / block_size + 1;
}

}  // namespace lm
