#include "loader/integer_linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "base/fp16.h"

namespace lm {
namespace {

constexpr int64_t kBlock = 32;  // GGML's Q4_0 / Q5_0 / Q8_0 block
// Q4_Z128's block (kernels/cpu/q4_z128_blocks.h; the loader writes it as it writes GGML's blocks,
// from the documented layout): {fp16 d; uint8 z; uint8 0; uint8 qs[64]} per 128 columns, element
// 32j + i (i < 16) the low nibble of qs[16j + i], element 32j + 16 + i its high nibble.
constexpr int64_t kZBlock = 128;
constexpr int kMaxZero = 15;

bool is_exact_fp16(float s) { return std::isfinite(s) && fp16_to_fp32(fp32_to_fp16(s)) == s; }

// True when every block of `block` columns lies inside one group (so one scale per block and
// row).
bool blocks_inside_groups(const std::vector<int32_t>& group_of_col, int64_t block = kBlock) {
  const auto size = static_cast<size_t>(block);
  if (group_of_col.size() % size != 0) return false;
  for (size_t b = 0; b < group_of_col.size(); b += size) {
    for (size_t k = b + 1; k < b + size; ++k)
      if (group_of_col[k] != group_of_col[b]) return false;
  }
  return true;
}

// The smallest and largest of q[0, n) (n > 0). Eight running minimums and maximums side by side,
// which GCC turns into one SSE register each at -O2 (a single running pair stays scalar
// conditional moves: with a second pass per block of 128, those took 45% of a GPTQ load); then
// the tail. Branch-free either way: std::minmax_element's branches, mispredicted on random
// nibbles, took most of a 7B checkpoint's repack.
std::pair<int, int> min_max(const int16_t* q, int64_t n) {
  constexpr int kLanes = 8;
  int16_t lo[kLanes], hi[kLanes];
  for (int j = 0; j < kLanes; ++j) lo[j] = hi[j] = q[0];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      lo[j] = q[i + j] < lo[j] ? q[i + j] : lo[j];
      hi[j] = q[i + j] > hi[j] ? q[i + j] : hi[j];
    }
  }
  int min = q[0], max = q[0];
  for (int j = 0; j < kLanes; ++j) {
    min = std::min<int>(min, lo[j]);
    max = std::max<int>(max, hi[j]);
  }
  for (; i < n; ++i) {
    min = std::min<int>(min, q[i]);
    max = std::max<int>(max, q[i]);
  }
  return {min, max};
}

// The zero point z that makes every value of a block a nibble (q + z in [0, 15]), or -1 where
// none does (the block spans more than 16 levels).
int zero_point(const int16_t* q, int64_t n) {
  const auto [lo, hi] = min_max(q, n);
  const int z = std::max(0, -lo);
  return z <= kMaxZero && hi + z <= 15 ? z : -1;
}

// The zero point of every (row, block of 128) of w, row-major, or nullopt when w does not fit
// Q4_Z128 (a block spanning more than 16 levels, or one across two groups).
std::optional<std::vector<uint8_t>> q4_z128_zero_points(const IntegerLinear& w) {
  if (w.cols % kZBlock != 0 || !blocks_inside_groups(w.group_of_col, kZBlock)) return std::nullopt;
  std::vector<uint8_t> zeros(static_cast<size_t>(w.rows * w.cols / kZBlock));
  for (size_t b = 0; b < zeros.size(); ++b) {
    const int z = zero_point(w.q.data() + static_cast<int64_t>(b) * kZBlock, kZBlock);
    if (z < 0) return std::nullopt;
    zeros[b] = static_cast<uint8_t>(z);
  }
  return zeros;
}

// The memory of a repacked weight: its bytes and, when regrouped, its column order.
struct Storage {
  Buffer bytes;
  std::vector<int32_t> column_order;
};

RepackedLinear allocate(DType dtype, int64_t rows, int64_t cols,
                        std::vector<int32_t> column_order = {}) {
  const auto bytes = dtype_bytes(dtype, static_cast<uint64_t>(rows * cols));
  LM_CHECK(bytes.has_value());
  auto storage = std::make_shared<Storage>(
      Storage{Buffer::of_bytes(static_cast<int64_t>(*bytes), Buffer::Pages::kHuge),
              std::move(column_order)});
  Tensor weight{dtype, {rows, cols}, storage->bytes.view().data, Device::kCpu};
  if (!storage->column_order.empty()) weight.column_order = storage->column_order.data();
  return {weight, storage};
}

// w with its columns stably sorted by group, and that order; nullopt when the groups are already
// in whole blocks, or would not be after sorting (a group size that is not a multiple of 32).
std::optional<std::pair<IntegerLinear, std::vector<int32_t>>> regrouped(const IntegerLinear& w) {
  if (blocks_inside_groups(w.group_of_col)) return std::nullopt;
  std::vector<int32_t> order(static_cast<size_t>(w.cols));
  for (int64_t k = 0; k < w.cols; ++k) order[static_cast<size_t>(k)] = static_cast<int32_t>(k);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return w.group_of_col[static_cast<size_t>(a)] < w.group_of_col[static_cast<size_t>(b)];
  });
  IntegerLinear out = w;
  for (int64_t j = 0; j < w.cols; ++j)
    out.group_of_col[static_cast<size_t>(j)] =
        w.group_of_col[static_cast<size_t>(order[static_cast<size_t>(j)])];
  for (int64_t n = 0; n < w.rows; ++n) {  // row by row: one source and one destination line
    const int16_t* src = w.q.data() + n * w.cols;
    int16_t* dst = out.q.data() + n * w.cols;
    for (int64_t j = 0; j < w.cols; ++j) dst[j] = src[order[static_cast<size_t>(j)]];
  }
  if (!blocks_inside_groups(out.group_of_col)) return std::nullopt;
  return std::make_pair(std::move(out), std::move(order));
}

// One row's blocks in `dtype` (Q4_0, Q5_0 or Q8_0 layout, kernels/cpu/row_format.h).
void write_row_blocks(DType dtype, const IntegerLinear& w, int64_t n, uint8_t* dst) {
  const int16_t* q = w.q.data() + n * w.cols;
  const float* scales = w.scales.data() + n * w.num_groups;
  const int64_t block_bytes = dtype_info(dtype).block_bytes;
  for (int64_t b = 0; b < w.cols / kBlock; ++b, q += kBlock, dst += block_bytes) {
    const uint16_t d = fp32_to_fp16(scales[w.group_of_col[static_cast<size_t>(b * kBlock)]]);
    std::memcpy(dst, &d, 2);
    if (dtype == DType::kQ8_0) {
      for (int i = 0; i < kBlock; ++i) dst[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q[i]));
    } else if (dtype == DType::kQ4_0) {
      for (int i = 0; i < kBlock / 2; ++i)
        dst[2 + i] = static_cast<uint8_t>((q[i] + 8) | ((q[i + 16] + 8) << 4));
    } else {  // Q5_0: low nibbles as Q4_0, the fifth bit of element i in bit i of qh
      uint32_t qh = 0;
      for (int i = 0; i < kBlock; ++i) qh |= static_cast<uint32_t>(((q[i] + 16) >> 4) & 1) << i;
      std::memcpy(dst + 2, &qh, 4);
      for (int i = 0; i < kBlock / 2; ++i) {
        dst[6 + i] = static_cast<uint8_t>(((q[i] + 16) & 0xf) | (((q[i + 16] + 16) & 0xf) << 4));
      }
    }
  }
}

// One row in Q4_Z128 (kernels/cpu/q4_z128_blocks.h): d = s, z its block's zero point (zeros:
// the row's, from q4_z128_zero_points), nibble = q + z.
void write_row_q4_z128(const IntegerLinear& w, int64_t n, const uint8_t* zeros, uint8_t* dst) {
  const int16_t* q = w.q.data() + n * w.cols;
  const float* scales = w.scales.data() + n * w.num_groups;
  const int64_t block_bytes = dtype_info(DType::kQ4_Z128).block_bytes;
  for (int64_t b = 0; b < w.cols / kZBlock; ++b, q += kZBlock, dst += block_bytes) {
    const uint16_t d = fp32_to_fp16(scales[w.group_of_col[static_cast<size_t>(b * kZBlock)]]);
    std::memcpy(dst, &d, 2);
    const int z = zeros[b];
    dst[2] = static_cast<uint8_t>(z);
    dst[3] = 0;
    uint8_t* qs = dst + 4;
    for (int j = 0; j < kZBlock / 32; ++j) {
      for (int i = 0; i < 16; ++i) {
        qs[16 * j + i] =
            static_cast<uint8_t>((q[32 * j + i] + z) | ((q[32 * j + 16 + i] + z) << 4));
      }
    }
  }
}

}  // namespace

Result<RepackedLinear> repack_integer_linear(const IntegerLinear& w, const std::string& name) {
  LM_CHECK(static_cast<int64_t>(w.q.size()) == w.rows * w.cols);
  LM_CHECK(static_cast<int64_t>(w.group_of_col.size()) == w.cols);
  LM_CHECK(static_cast<int64_t>(w.scales.size()) == w.rows * w.num_groups);
  bool fp16_scales = true;
  for (float s : w.scales) {
    if (!std::isfinite(s))
      return Error{name + ": a scale is not finite (" + std::to_string(s) + ")"};
    fp16_scales = fp16_scales && is_exact_fp16(s);
  }
  std::optional<DType> block_dtype;
  auto regroup = fp16_scales ? regrouped(w) : std::nullopt;
  const IntegerLinear& blocks = regroup ? regroup->first : w;
  // Q4_Z128 only for row counts that are a multiple of 8: the int8 kernels stream it interleaved
  // 8 rows at a time, and other Linears (say a 32001-token head) keep GGML's blocks, which every
  // path reads at speed. The blocks' ranges decide it (an 8-bit weight fails at its first
  // block), so a 4-bit weight's values are scanned once.
  std::optional<std::vector<uint8_t>> zeros;
  if (fp16_scales && w.rows % 8 == 0) zeros = q4_z128_zero_points(blocks);
  if (zeros) {
    block_dtype = DType::kQ4_Z128;
  } else if (fp16_scales && blocks_inside_groups(blocks.group_of_col)) {
    const auto [qmin, qmax] = w.q.empty() ? std::pair<int, int>{0, 0}
                                          : min_max(w.q.data(), static_cast<int64_t>(w.q.size()));
    if (qmin >= -8 && qmax <= 7) {
      block_dtype = DType::kQ4_0;
    } else if (qmin >= -16 && qmax <= 15) {
      block_dtype = DType::kQ5_0;
    } else if (qmin >= -128 && qmax <= 127) {
      block_dtype = DType::kQ8_0;
    }
  }
  if (block_dtype) {
    RepackedLinear out = allocate(*block_dtype, w.rows, w.cols,
                                  regroup ? std::move(regroup->second) : std::vector<int32_t>{});
    const int64_t row_bytes = out.weight.row_bytes();
    auto* dst = static_cast<uint8_t*>(out.weight.data);
    for (int64_t n = 0; n < w.rows; ++n) {
      if (*block_dtype == DType::kQ4_Z128) {
        write_row_q4_z128(blocks, n, zeros->data() + n * (w.cols / kZBlock), dst + n * row_bytes);
      } else {
        write_row_blocks(*block_dtype, blocks, n, dst + n * row_bytes);
      }
    }
    return out;
  }
  RepackedLinear out = allocate(DType::kF32, w.rows, w.cols);
  float* dst = out.weight.as<float>();
  for (int64_t n = 0; n < w.rows; ++n) {
    const float* scales = w.scales.data() + n * w.num_groups;
    for (int64_t k = 0; k < w.cols; ++k) {
      dst[n * w.cols + k] = scales[w.group_of_col[static_cast<size_t>(k)]] *
                            static_cast<float>(w.q[static_cast<size_t>(n * w.cols + k)]);
    }
  }
  return out;
}

}  // namespace lm
