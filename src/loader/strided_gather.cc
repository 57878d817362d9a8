#include "loader/strided_gather.h"

#include <cstring>
#include <vector>

namespace lm {
namespace {

struct Dim {
  int64_t size;
  int64_t stride;  // in elements
};

// Drops size-1 dims and merges each dim into the next when they step through memory as one
// (stride[k] == stride[k+1] * size[k+1]); a contiguous view becomes one dim of stride 1.
std::vector<Dim> collapse(std::span<const int64_t> shape, std::span<const int64_t> strides) {
  std::vector<Dim> dims;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    dims.push_back({shape[k], strides[k]});
  }
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty() && merged.back().stride == d.stride * d.size) {
      merged.back() = {merged.back().size * d.size, d.stride};
    } else {
      merged.push_back(d);
    }
  }
  return merged;
}

}  // namespace

Status gather_strided(const uint8_t* first, int64_t element_bytes, std::span<const int64_t> shape,
                      std::span<const int64_t> strides, const ByteSink& sink, size_t chunk_bytes) {
  for (int64_t d : shape) {
    if (d == 0) return {};
  }
  std::vector<Dim> dims = collapse(shape, strides);
  if (dims.empty()) dims.push_back({1, 1});  // a scalar, or all dims of size 1
  // The innermost dim is copied as runs: one run of `size` elements when it is contiguous,
  // otherwise runs of one element.
  const Dim inner = dims.back();
  dims.pop_back();
  const bool inner_contiguous = inner.stride == 1;
  const int64_t run_elements = inner_contiguous ? inner.size : 1;
  const int64_t runs_per_row = inner_contiguous ? 1 : inner.size;
  const size_t run_bytes = static_cast<size_t>(run_elements * element_bytes);

  std::vector<uint8_t> chunk;
  auto flush = [&]() -> Status {
    if (chunk.empty()) return {};
    Status s = sink(chunk);
    chunk.clear();
    return s;
  };

  std::vector<int64_t> index(dims.size(), 0);
  int64_t row_offset = 0;  // in elements: where the current row starts
  while (true) {
    for (int64_t r = 0; r < runs_per_row; ++r) {
      const uint8_t* src = first + (row_offset + r * inner.stride) * element_bytes;
      if (run_bytes > chunk_bytes) {  // a long contiguous run goes straight from the source
        LM_RETURN_IF_ERROR(flush());
        LM_RETURN_IF_ERROR(sink({src, run_bytes}));
        continue;
      }
      if (chunk.size() + run_bytes > chunk_bytes) {
        LM_RETURN_IF_ERROR(flush());
      }
      chunk.insert(chunk.end(), src, src + run_bytes);
    }
    // Advance the odometer over the outer dims, last dim fastest.
    size_t k = dims.size();
    while (true) {
      if (k == 0) return flush();
      --k;
      row_offset += dims[k].stride;
      if (++index[k] < dims[k].size) break;
      row_offset -= dims[k].stride * dims[k].size;
      index[k] = 0;
    }
  }
}

}  // namespace lm
