// Reading a matrix's rows a panel at a time, for the packers of the panel layouts (panels16.h,
// bf16_pairs.h). Kept out of those headers: the ISA-flag kernel files include them, and nothing
// built with wider instruction sets may instantiate templates shared with the rest (std::vector).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/panels16.h"

namespace lm::kernels {

// For each panel g of n rows (n a multiple of kPanel16Rows), place(g, rows) with that panel's
// rows of k 16-bit values copied out of src (row c at rows + c * k; src row j at src + j *
// src_row_bytes) before it is called, so a packer may write panel g where its rows lay.
template <typename Place>
void for_each_panel_rows(const void* src, int64_t src_row_bytes, int64_t n, int64_t k,
                         const Place& place) {
  std::vector<uint16_t> rows(static_cast<size_t>(kPanel16Rows * k));
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t g = 0; g < n / kPanel16Rows; ++g) {
    for (int64_t c = 0; c < kPanel16Rows; ++c)
      std::memcpy(rows.data() + c * k, in + (g * kPanel16Rows + c) * src_row_bytes,
                  static_cast<size_t>(2 * k));
    place(g, rows.data());
  }
}

}  // namespace lm::kernels
