// Interleaving is a pure byte permutation, one rule for every format: each field of a block is
// cut into words, and word w of row r lands at field_place * 8 + (w * 8 + r) * word_bytes, where a
// field's place is the bytes of the fields listed before it (for most formats its offset in the
// block; Q6_K lists its fields in the order its kernel reads them).
#include "kernels/cpu/interleaved_rows.h"

#include <cstring>
#include <span>

#include "base/check.h"
#include "kernels/cpu/kquant_blocks.h"
#include "kernels/cpu/lowbit_blocks.h"
#include "kernels/cpu/q4_z128_blocks.h"

namespace lm::kernels {
namespace {

struct Field {
  int64_t offset, bytes, word;  // in one row's block
};

// The fields of one block of `format`, in order, with the word size each is cut into.
std::span<const Field> fields(RowFormat format) {
  static constexpr Field kQ4_0[] = {{0, 2, 2}, {2, 16, 8}};
  static constexpr Field kQ4_1[] = {{0, 2, 2}, {2, 2, 2}, {4, 16, 8}};
  static constexpr Field kQ8_0[] = {{0, 2, 2}, {2, 32, 8}};
  // Q5's 32 fifth bits cut into bytes: byte t of the 8 rows' qh side by side is one 64-bit mask,
  // bit 8r + e = element 8t + e of row r, the byte order of the quant words.
  static constexpr Field kQ5_0[] = {{0, 2, 2}, {2, 4, 1}, {6, 16, 8}};
  static constexpr Field kQ5_1[] = {{0, 2, 2}, {2, 2, 2}, {4, 4, 1}, {8, 16, 8}};
  static constexpr Field kQ4_K[] = {
      {0, 2, 2}, {2, 2, 2}, {kquant::kScalesOffset, 12, 4}, {kquant::kQ4_KQsOffset, 128, 8}};
  // Q5_K: Q4_K's fields with the fifth bits (4 words) between the scales and the nibbles.
  static constexpr Field kQ5_K[] = {{0, 2, 2},
                                    {2, 2, 2},
                                    {kquant::kScalesOffset, 12, 4},
                                    {kquant::kQ5_KQhOffset, 32, 8},
                                    {kquant::kQ5_KQsOffset, 128, 8}};
  // Q6_K in the kernel's reading order, so that a super-block streams forwards (the hardware
  // prefetcher follows it; GGML's order made the kernel jump between ql and qh): d, the scale
  // pairs, then per half of 128 elements ql words 0-3, qh words 0-3, ql words 4-7.
  static constexpr int64_t kQl = 0, kQh = kquant::kQ6_KQhOffset;
  static constexpr Field kQ6_K[] = {{kquant::kQ6_KDOffset, 2, 2},
                                    {kquant::kQ6_KScalesOffset, 16, 2},
                                    {kQl, 32, 8},
                                    {kQh, 32, 8},
                                    {kQl + 32, 32, 8},
                                    {kQl + 64, 32, 8},
                                    {kQh + 32, 32, 8},
                                    {kQl + 96, 32, 8}};
  // The low-bit formats (lowbit_blocks.h), also in reading order. IQ4_NL is Q4_0's layout; IQ4_XS
  // is d, the high scale bits, the low scale nibbles, then per group of 32 two words of nibbles
  // (Q4_0's order); Q3_K is d, its 12 packed scale bytes, hmask, qs; Q2_K is d, dmin, each
  // group's scale/min byte pair, qs.
  static constexpr Field kIQ4_NL[] = {{0, 2, 2}, {lowbit::kIQ4_NLQsOffset, 16, 8}};
  static constexpr Field kIQ4_XS[] = {{0, 2, 2},
                                      {lowbit::kIQ4_XSScalesHOffset, 2, 2},
                                      {lowbit::kIQ4_XSScalesLOffset, 4, 4},
                                      {lowbit::kIQ4_XSQsOffset, 128, 8}};
  static constexpr Field kQ3_K[] = {{lowbit::kQ3_KDOffset, 2, 2},
                                    {lowbit::kQ3_KScalesOffset, 12, 4},
                                    {0, 32, 8},
                                    {lowbit::kQ3_KQsOffset, 64, 8}};
  static constexpr Field kQ2_K[] = {{lowbit::kQ2_KDOffset, 2, 2},
                                    {lowbit::kQ2_KDOffset + 2, 2, 2},
                                    {0, 16, 2},
                                    {lowbit::kQ2_KQsOffset, 64, 8}};
  // Q4_Z128: d, z, the unused byte (so the nibbles start 32 bytes into the group block), then per
  // sub-block of 32 two words of nibbles (Q4_0's order).
  static constexpr Field kQ4_Z128[] = {{q4z::kDOffset, 2, 2},
                                       {q4z::kZOffset, 1, 1},
                                       {q4z::kZOffset + 1, 1, 1},
                                       {q4z::kQsOffset, 64, 8}};
  switch (format) {
    case RowFormat::kQ4_0:
      return kQ4_0;
    case RowFormat::kQ4_Z128:
      return kQ4_Z128;
    case RowFormat::kQ4_1:
      return kQ4_1;
    case RowFormat::kQ8_0:
      return kQ8_0;
    case RowFormat::kQ5_0:
      return kQ5_0;
    case RowFormat::kQ5_1:
      return kQ5_1;
    case RowFormat::kQ4_K:
      return kQ4_K;
    case RowFormat::kQ5_K:
      return kQ5_K;
    case RowFormat::kQ6_K:
      return kQ6_K;
    case RowFormat::kIQ4_NL:
      return kIQ4_NL;
    case RowFormat::kIQ4_XS:
      return kIQ4_XS;
    case RowFormat::kQ3_K:
      return kQ3_K;
    case RowFormat::kQ2_K:
      return kQ2_K;
    default:
      return {};
  }
}

// memcpy of one word with the size known at compile time (a 3.6 GB model is interleaved at load:
// a library call per word took seconds).
inline void copy_word(uint8_t* dst, const uint8_t* src, int64_t bytes) {
  if (bytes == 8) {
    std::memcpy(dst, src, 8);
  } else if (bytes == 4) {
    std::memcpy(dst, src, 4);
  } else if (bytes == 2) {
    std::memcpy(dst, src, 2);
  } else if (bytes == 1) {
    *dst = *src;
  } else {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
}

// Calls copy(row r's byte offset in its block, the group block's byte offset, bytes) for every
// word of every row of one block.
template <typename Copy>
void for_each_word(RowFormat format, Copy copy) {
  int64_t place = 0;
  for (const Field& f : fields(format)) {
    for (int64_t w = 0; w < f.bytes / f.word; ++w) {
      for (int64_t r = 0; r < kInterleavedRows; ++r)
        copy(r, f.offset + w * f.word,
             place * kInterleavedRows + (w * kInterleavedRows + r) * f.word, f.word);
    }
    place += f.bytes;
  }
}

}  // namespace

bool can_interleave(RowFormat format, int64_t n, int64_t k) {
  const RowFormatInfo& info = row_format_info(format);
  return !fields(format).empty() && n > 0 && n % kInterleavedRows == 0 && k > 0 &&
         k % info.block_size == 0;
}

void interleave_rows(RowFormat format, const void* src, int64_t src_row_bytes, int64_t n, int64_t k,
                     void* dst) {
  LM_CHECK(can_interleave(format, n, k));
  const RowFormatInfo& info = row_format_info(format);
  const int64_t blocks = k / info.block_size;
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t group_block_bytes = kInterleavedRows * info.block_bytes;
  for (int64_t g = 0; g < n / kInterleavedRows; ++g) {
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* block_out = out + (g * blocks + b) * group_block_bytes;
      for_each_word(format, [&](int64_t r, int64_t from, int64_t to, int64_t bytes) {
        const uint8_t* row = in + (g * kInterleavedRows + r) * src_row_bytes;
        copy_word(block_out + to, row + b * info.block_bytes + from, bytes);
      });
    }
  }
}

void deinterleave_row(RowFormat format, const void* src, int64_t j, int64_t k, void* dst) {
  LM_CHECK(can_interleave(format, kInterleavedRows, k) && j >= 0);
  const RowFormatInfo& info = row_format_info(format);
  const int64_t blocks = k / info.block_size;
  const int64_t g = j / kInterleavedRows;
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t group_block_bytes = kInterleavedRows * info.block_bytes;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block_in = in + (g * blocks + b) * group_block_bytes;
    for_each_word(format, [&](int64_t r, int64_t from, int64_t to, int64_t bytes) {
      if (r == j % kInterleavedRows)
        copy_word(out + b * info.block_bytes + from, block_in + to, bytes);
    });
  }
}

}  // namespace lm::kernels
