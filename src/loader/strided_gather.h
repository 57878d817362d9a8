// Streams the elements of a strided view (a transposed or sliced torch tensor) in row-major order
// as contiguous byte chunks, so a converter never holds more than one chunk of a tensor in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "base/result.h"

namespace lm {

using ByteSink = std::function<Status(std::span<const uint8_t>)>;

// Calls `sink` with the bytes of the view's elements in row-major order. `first` points at the
// element at index (0, ..., 0); the caller has checked that every element the view reaches lies
// in readable memory. Contiguous runs are passed straight from the source; scattered elements are
// packed into chunks of at most `chunk_bytes`.
Status gather_strided(const uint8_t* first, int64_t element_bytes, std::span<const int64_t> shape,
                      std::span<const int64_t> strides, const ByteSink& sink,
                      size_t chunk_bytes = size_t{1} << 20);

}  // namespace lm
