// A run-time row count handed to a kernel template's compile-time one: the tiles of the int8
// GEMMs and the decode attention kernels keep one accumulator register per row, so their row
// count is a template parameter, and a step's count (a verify step's 2-5 rows) picks one.
#pragma once

#include <cstdint>

namespace lm::kernels {

// f.template operator()<R>() with R = n, for 1 <= n <= kMax (n above kMax runs kMax; the caller
// keeps n in range).
template <int kMax, typename F>
inline void with_row_count(int64_t n, const F& f) {
  if constexpr (kMax > 1) {
    if (n < kMax) return with_row_count<kMax - 1>(n, f);
  }
  f.template operator()<kMax>();
}

}  // namespace lm::kernels
