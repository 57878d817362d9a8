#include "loader/packed_linears.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "base/fp16.h"

namespace lm {
namespace {

constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

Error bad(const std::string& name, const std::string& what) { return Error{name + ": " + what}; }

std::string dims(const Tensor& t) { return shape_string(t.shape); }

Result<const Tensor*> need(const TensorLookup& find, const std::string& name,
                           std::initializer_list<DType> dtypes, int rank) {
  const Tensor* t = find(name);
  if (t == nullptr) return bad(name, "is missing (the quantized Linear needs it)");
  if (std::find(dtypes.begin(), dtypes.end(), t->dtype) == dtypes.end()) {
    std::string names;
    for (DType d : dtypes) names += (names.empty() ? "" : " or ") + std::string(dtype_name(d));
    return bad(name, "has dtype " + std::string(dtype_name(t->dtype)) + ", expected " + names);
  }
  if (t->rank() != rank) {
    return bad(name, "has shape " + dims(*t) + ", expected " + std::to_string(rank) + " dimension" +
                         (rank == 1 ? "" : "s"));
  }
  return t;
}

const std::initializer_list<DType> kScaleDTypes = {DType::kF16, DType::kBF16, DType::kF32};

float scale_at(const Tensor& t, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  switch (t.dtype) {
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return fp16_to_fp32(h);
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return bf16_to_fp32(h);
    }
    default: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
  }
}

// Output rows unpacked together from a column-major pack (GPTQ's, AWQ's qweight).
constexpr int64_t kUnpackRows = 256;
constexpr int64_t kUnpackCols = 32;  // AWQ's tile width: one cache line of int16 per row

uint32_t word_at(const Tensor& t, int64_t i) {
  uint32_t w;
  std::memcpy(&w, static_cast<const uint8_t*>(t.data) + 4 * i, 4);
  return w;
}

// An integer tensor's element i (I8, I32 or I64) as int64.
int64_t int_at(const Tensor& t, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  switch (t.dtype) {
    case DType::kI8:
      return static_cast<int8_t>(p[i]);
    case DType::kI64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    default:
      return static_cast<int32_t>(word_at(t, i));
  }
}

int64_t num_groups(int64_t cols, int64_t group_size) {
  return group_size < 0 ? 1 : (cols + group_size - 1) / group_size;
}

std::string group_text(int64_t group_size) {
  return group_size < 0 ? std::string("one group per row (group_size -1)")
                        : "group_size " + std::to_string(group_size);
}

IntegerLinear shaped(int64_t rows, int64_t cols, int64_t groups, std::vector<int16_t> reuse) {
  IntegerLinear w;
  w.rows = rows;
  w.cols = cols;
  w.num_groups = groups;
  w.q = std::move(reuse);
  w.q.assign(static_cast<size_t>(rows * cols), 0);
  w.group_of_col.resize(static_cast<size_t>(cols));
  w.scales.resize(static_cast<size_t>(rows * groups));
  return w;
}

// Column k's group: g_idx (`name`, when the checkpoint has it) or k / group_size.
Status read_groups(const TensorLookup& find, const std::string& name, int64_t group_size,
                   IntegerLinear& w) {
  const Tensor* g_idx = find(name);
  if (g_idx == nullptr) {
    for (int64_t k = 0; k < w.cols; ++k)
      w.group_of_col[static_cast<size_t>(k)] =
          group_size < 0 ? 0 : static_cast<int32_t>(k / group_size);
    return {};
  }
  LM_ASSIGN_OR_RETURN(g_idx, need(find, name, {DType::kI32, DType::kI64}, 1));
  if (g_idx->dim(0) != w.cols) {
    return bad(name, "has " + std::to_string(g_idx->dim(0)) + " entries for the " +
                         std::to_string(w.cols) + " input columns of the packed weight");
  }
  for (int64_t k = 0; k < w.cols; ++k) {
    const int64_t g = int_at(*g_idx, k);
    if (g < 0 || g >= w.num_groups) {
      return bad(name, "entry " + std::to_string(k) + " is group " + std::to_string(g) +
                           ", outside the " + std::to_string(w.num_groups) +
                           " groups of the scales");
    }
    w.group_of_col[static_cast<size_t>(k)] = static_cast<int32_t>(g);
  }
  return {};
}

// Scales stored [G, N] (GPTQ, AWQ) into w.scales [N, G].
Status read_transposed_scales(const TensorLookup& find, const std::string& name, int64_t group_size,
                              IntegerLinear& w) {
  LM_ASSIGN_OR_RETURN(const Tensor* s, need(find, name, kScaleDTypes, 2));
  if (s->dim(1) != w.rows)
    return bad(name, "has shape " + dims(*s) + ", but the packed weight has " +
                         std::to_string(w.rows) + " output rows");
  if (s->dim(0) != w.num_groups) {
    return bad(name, "has " + std::to_string(s->dim(0)) + " groups, but " + group_text(group_size) +
                         " over " + std::to_string(w.cols) + " input columns makes " +
                         std::to_string(w.num_groups) + " (mismatched group size)");
  }
  for (int64_t g = 0; g < w.num_groups; ++g)
    for (int64_t n = 0; n < w.rows; ++n)
      w.scales[static_cast<size_t>(n * w.num_groups + g)] = scale_at(*s, g * w.rows + n);
  return {};
}

// Stored integers minus zero-points: w.q[n][k] -= zero(n, group_of_col[k]).
void subtract_zeros(IntegerLinear& w, const std::vector<int16_t>& zeros /* [N, G] */) {
  for (int64_t n = 0; n < w.rows; ++n)
    for (int64_t k = 0; k < w.cols; ++k)
      w.q[static_cast<size_t>(n * w.cols + k)] = static_cast<int16_t>(
          w.q[static_cast<size_t>(n * w.cols + k)] -
          zeros[static_cast<size_t>(n * w.num_groups + w.group_of_col[static_cast<size_t>(k)])]);
}

// Zeros packed along the output rows in words [G, ceil(N / per_word)] (GPTQ sequential values,
// AWQ's interleaved order), each word first adjusted by `add` (GPTQ v1).
Result<std::vector<int16_t>> read_row_packed_zeros(const TensorLookup& find,
                                                   const std::string& name, const IntegerLinear& w,
                                                   int bits, bool awq, uint32_t add) {
  LM_ASSIGN_OR_RETURN(const Tensor* z, need(find, name, {DType::kI32}, 2));
  const int per_word = 32 / bits;
  const int64_t words = (w.rows + per_word - 1) / per_word;
  if (z->dim(0) != w.num_groups || z->dim(1) != words) {
    return bad(name, "has shape " + dims(*z) + ", expected [" + std::to_string(w.num_groups) +
                         ", " + std::to_string(words) + "] (" + std::to_string(w.num_groups) +
                         " groups of " + std::to_string(w.rows) + " rows, " +
                         std::to_string(per_word) + " per int32)");
  }
  const uint32_t mask = (1u << bits) - 1;
  std::vector<int16_t> zeros(static_cast<size_t>(w.rows * w.num_groups));
  for (int64_t g = 0; g < w.num_groups; ++g) {
    for (int64_t n = 0; n < w.rows; ++n) {
      const uint32_t word = word_at(*z, g * words + n / per_word) + add;
      const int slot = awq ? kAwqNibble[n % 8] : static_cast<int>(n % per_word);
      zeros[static_cast<size_t>(n * w.num_groups + g)] =
          static_cast<int16_t>((word >> (bits * slot)) & mask);
    }
  }
  return zeros;
}

// compressed-tensors' dense packing: element i of a line at bit i * bits of its words, stored
// as value + 2^(bits - 1). `word(j)` reads the line's j-th word.
template <typename Word>
int16_t unpack_signed(const Word& word, int64_t i, int bits) {
  const int64_t bit = i * bits;
  const uint32_t mask = (1u << bits) - 1;
  uint64_t pair = word(bit / 32);
  if (bit % 32 + bits > 32) pair |= static_cast<uint64_t>(word(bit / 32 + 1)) << 32;
  return static_cast<int16_t>(static_cast<int>((pair >> (bit % 32)) & mask) - (1 << (bits - 1)));
}

// compressed-tensors' scales [N, G] (group), [N, 1] (channel) or one (tensor) into w.scales.
Status read_ct_scales(const TensorLookup& find, const std::string& name,
                      const CompressedTensorsScheme& s, IntegerLinear& w) {
  const Tensor* t = find(name);
  if (t == nullptr) return bad(name, "is missing (the quantized Linear needs it)");
  LM_ASSIGN_OR_RETURN(t, need(find, name, kScaleDTypes, t->rank()));
  if (s.strategy == "tensor") {
    if (t->numel() != 1) return bad(name, "has shape " + dims(*t) + ", expected one scale");
    std::fill(w.scales.begin(), w.scales.end(), scale_at(*t, 0));
    return {};
  }
  if (t->rank() != 2 || t->dim(0) != w.rows || t->dim(1) != w.num_groups) {
    return bad(name, "has shape " + dims(*t) + ", expected [" + std::to_string(w.rows) + ", " +
                         std::to_string(w.num_groups) + "] (" + s.strategy + " strategy, " +
                         group_text(s.group_size) + ", " + std::to_string(w.cols) +
                         " input columns; mismatched group size?)");
  }
  for (int64_t i = 0; i < w.rows * w.num_groups; ++i)
    w.scales[static_cast<size_t>(i)] = scale_at(*t, i);
  return {};
}

// compressed-tensors' zero-points [N, G]: packed along dim 0 for the group and channel strategies
// of pack-quantized, else stored as integers (checked against the signed b-bit range).
Result<std::vector<int16_t>> read_ct_zeros(const TensorLookup& find, const std::string& name,
                                           const CompressedTensorsScheme& s, bool packed,
                                           const IntegerLinear& w) {
  std::vector<int16_t> zeros(static_cast<size_t>(w.rows * w.num_groups));
  if (packed && s.strategy != "tensor") {
    LM_ASSIGN_OR_RETURN(const Tensor* z, need(find, name, {DType::kI32}, 2));
    const int64_t words = (w.rows * s.bits + 31) / 32;
    if (z->dim(0) != words || z->dim(1) != w.num_groups) {
      return bad(name, "has shape " + dims(*z) + ", expected [" + std::to_string(words) + ", " +
                           std::to_string(w.num_groups) + "] (" + std::to_string(w.rows) +
                           " rows of " + std::to_string(s.bits) + "-bit zero-points per group)");
    }
    for (int64_t g = 0; g < w.num_groups; ++g) {
      const auto word = [&](int64_t j) { return word_at(*z, j * w.num_groups + g); };
      for (int64_t n = 0; n < w.rows; ++n)
        zeros[static_cast<size_t>(n * w.num_groups + g)] = unpack_signed(word, n, s.bits);
    }
    return zeros;
  }
  const Tensor* z = find(name);
  if (z == nullptr) return bad(name, "is missing (the quantized Linear needs it)");
  LM_ASSIGN_OR_RETURN(z, need(find, name, {DType::kI8, DType::kI32, DType::kI64}, z->rank()));
  const bool one = s.strategy == "tensor";
  if (one ? z->numel() != 1 : z->numel() != w.rows * w.num_groups) {
    return bad(
        name, "has shape " + dims(*z) + ", expected " +
                  (one ? std::string("one zero-point")
                       : "[" + std::to_string(w.rows) + ", " + std::to_string(w.num_groups) + "]"));
  }
  const int64_t lo = -(int64_t{1} << (s.bits - 1)), hi = (int64_t{1} << (s.bits - 1)) - 1;
  for (int64_t i = 0; i < w.rows * w.num_groups; ++i) {
    const int64_t v = int_at(*z, one ? 0 : i);
    if (v < lo || v > hi) {
      return bad(name, "zero-point " + std::to_string(v) + " is outside the " +
                           std::to_string(s.bits) + "-bit range [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
    }
    zeros[static_cast<size_t>(i)] = static_cast<int16_t>(v);
  }
  return zeros;
}

}  // namespace

Result<IntegerLinear> read_gptq_linear(const QuantizationConfig& q, const std::string& prefix,
                                       const TensorLookup& find, std::vector<int16_t> reuse) {
  const std::string qweight_name = prefix + ".qweight";
  LM_ASSIGN_OR_RETURN(const Tensor* qweight, need(find, qweight_name, {DType::kI32}, 2));
  const int per_word = 32 / q.bits;
  const int64_t cols = qweight->dim(0) * per_word, rows = qweight->dim(1);
  IntegerLinear w = shaped(rows, cols, num_groups(cols, q.group_size), std::move(reuse));
  LM_RETURN_IF_ERROR(read_transposed_scales(find, prefix + ".scales", q.group_size, w));
  LM_RETURN_IF_ERROR(read_groups(find, prefix + ".g_idx", q.group_size, w));
  const uint32_t mask = (1u << q.bits) - 1;
  // Row tiles: a word row gives each row of the tile its next per_word values, so the tile's
  // destination lines stay in cache while the words are read forwards.
  for (int64_t n0 = 0; n0 < rows; n0 += kUnpackRows) {
    const int64_t n1 = std::min(rows, n0 + kUnpackRows);
    for (int64_t kw = 0; kw < qweight->dim(0); ++kw) {
      for (int64_t n = n0; n < n1; ++n) {
        const uint32_t word = word_at(*qweight, kw * rows + n);
        int16_t* dst = w.q.data() + n * cols + kw * per_word;
        for (int j = 0; j < per_word; ++j)
          dst[j] = static_cast<int16_t>((word >> (q.bits * j)) & mask);
      }
    }
  }
  const uint32_t v1_add = !q.gptq_v1_zeros ? 0u : q.bits == 4 ? 0x11111111u : 0x01010101u;
  LM_ASSIGN_OR_RETURN(auto zeros, read_row_packed_zeros(find, prefix + ".qzeros", w, q.bits,
                                                        /*awq=*/false, v1_add));
  subtract_zeros(w, zeros);
  return w;
}

Result<IntegerLinear> read_awq_linear(const QuantizationConfig& q, const std::string& prefix,
                                      const TensorLookup& find, std::vector<int16_t> reuse) {
  LM_ASSIGN_OR_RETURN(const Tensor* qweight, need(find, prefix + ".qweight", {DType::kI32}, 2));
  const int64_t cols = qweight->dim(0), rows = qweight->dim(1) * 8;
  IntegerLinear w = shaped(rows, cols, num_groups(cols, q.group_size), std::move(reuse));
  LM_RETURN_IF_ERROR(read_transposed_scales(find, prefix + ".scales", q.group_size, w));
  LM_RETURN_IF_ERROR(read_groups(find, prefix + ".g_idx", q.group_size, w));
  // Each word holds 8 rows of one column. Written straight into the rows, a tile's stores hit
  // rows 2 * cols bytes apart, all in one L1 set when cols is a multiple of 2048; so a tile of
  // rows x kUnpackCols columns is gathered in a small contiguous buffer first, then each row's
  // piece copied out in one go.
  const int64_t words = rows / 8;
  std::vector<int16_t> tile(static_cast<size_t>(kUnpackRows * kUnpackCols));
  for (int64_t w0 = 0; w0 < words; w0 += kUnpackRows / 8) {
    const int64_t w1 = std::min(words, w0 + kUnpackRows / 8);
    for (int64_t k0 = 0; k0 < cols; k0 += kUnpackCols) {
      const int64_t k1 = std::min(cols, k0 + kUnpackCols);
      for (int64_t k = k0; k < k1; ++k) {
        for (int64_t nw = w0; nw < w1; ++nw) {
          const uint32_t word = word_at(*qweight, k * words + nw);
          int16_t* t = tile.data() + (nw - w0) * 8 * kUnpackCols + (k - k0);
          for (int j = 0; j < 8; ++j)
            t[j * kUnpackCols] = static_cast<int16_t>((word >> (4 * kAwqNibble[j])) & 0xf);
        }
      }
      for (int64_t n = w0 * 8; n < w1 * 8; ++n) {
        std::memcpy(w.q.data() + n * cols + k0, tile.data() + (n - w0 * 8) * kUnpackCols,
                    static_cast<size_t>(k1 - k0) * sizeof(int16_t));
      }
    }
  }
  LM_ASSIGN_OR_RETURN(auto zeros, read_row_packed_zeros(find, prefix + ".qzeros", w, 4,
                                                        /*awq=*/true, 0));
  subtract_zeros(w, zeros);
  return w;
}

Result<IntegerLinear> read_compressed_tensors_linear(const QuantizationConfig& q,
                                                     const CompressedTensorsScheme& s,
                                                     const std::string& prefix,
                                                     const TensorLookup& find,
                                                     std::vector<int16_t> reuse) {
  const bool packed = s.format == "pack-quantized";
  IntegerLinear w;
  if (packed) {
    const std::string packed_name = prefix + ".weight_packed";
    LM_ASSIGN_OR_RETURN(const Tensor* p, need(find, packed_name, {DType::kI32}, 2));
    const std::string shape_name = prefix + ".weight_shape";
    LM_ASSIGN_OR_RETURN(const Tensor* shape, need(find, shape_name, {DType::kI64, DType::kI32}, 1));
    if (shape->dim(0) != 2) return bad(shape_name, "has " + dims(*shape) + " entries, expected 2");
    const int64_t rows = int_at(*shape, 0), cols = int_at(*shape, 1);
    const int64_t words = cols > 0 ? (cols * s.bits + 31) / 32 : 0;
    if (rows != p->dim(0) || cols <= 0 || p->dim(1) != words) {
      return bad(packed_name, "has shape " + dims(*p) + ", but weight_shape [" +
                                  std::to_string(rows) + ", " + std::to_string(cols) + "] of " +
                                  std::to_string(s.bits) + "-bit values packs into [" +
                                  std::to_string(rows) + ", " + std::to_string(words) +
                                  "] (truncated or mismatched pack)");
    }
    const int64_t group = s.strategy == "group" ? s.group_size : -1;
    w = shaped(rows, cols, num_groups(cols, group), std::move(reuse));
    for (int64_t n = 0; n < rows; ++n) {
      const auto word = [&](int64_t j) { return word_at(*p, n * words + j); };
      for (int64_t k = 0; k < cols; ++k)
        w.q[static_cast<size_t>(n * cols + k)] = unpack_signed(word, k, s.bits);
    }
  } else {
    const std::string weight_name = prefix + ".weight";
    LM_ASSIGN_OR_RETURN(const Tensor* t, need(find, weight_name, {DType::kI8}, 2));
    const int64_t group = s.strategy == "group" ? s.group_size : -1;
    w = shaped(t->dim(0), t->dim(1), num_groups(t->dim(1), group), std::move(reuse));
    const int lo = -(1 << (s.bits - 1)), hi = (1 << (s.bits - 1)) - 1;
    for (int64_t i = 0; i < w.rows * w.cols; ++i) {
      const int v = static_cast<int8_t>(static_cast<const uint8_t*>(t->data)[i]);
      if (v < lo || v > hi) {
        return bad(weight_name, "value " + std::to_string(v) + " is outside the " +
                                    std::to_string(s.bits) + "-bit range");
      }
      w.q[static_cast<size_t>(i)] = static_cast<int16_t>(v);
    }
  }
  LM_RETURN_IF_ERROR(read_ct_scales(find, prefix + ".weight_scale", s, w));
  LM_RETURN_IF_ERROR(
      read_groups(find, prefix + ".weight_g_idx", s.strategy == "group" ? s.group_size : -1, w));
  if (!s.symmetric) {
    LM_ASSIGN_OR_RETURN(auto zeros,
                        read_ct_zeros(find, prefix + ".weight_zero_point", s, packed, w));
    subtract_zeros(w, zeros);
  }
  return w;
}

Result<Fp8Linear> read_fp8_linear(const QuantizationConfig& q,
                                  const CompressedTensorsScheme* scheme, const std::string& prefix,
                                  const TensorLookup& find) {
  const std::string weight_name = prefix + ".weight";
  LM_ASSIGN_OR_RETURN(const Tensor* t,
                      need(find, weight_name, {DType::kF8_E4M3, DType::kF8_E5M2}, 2));
  Fp8Linear w;
  w.rows = t->dim(0);
  w.cols = t->dim(1);
  w.format = t->dtype;
  w.values = static_cast<const uint8_t*>(t->data);
  if (w.rows <= 0 || w.cols <= 0) return bad(weight_name, "is empty (" + dims(*t) + ")");
  for (int64_t i = 0; i < w.rows * w.cols; ++i) {
    const uint8_t b = w.values[i];
    const bool finite = w.format == DType::kF8_E4M3 ? (b & 0x7f) != 0x7f : (b & 0x7c) != 0x7c;
    if (!finite) {
      return bad(weight_name, "holds a NaN or infinity (row " + std::to_string(i / w.cols) +
                                  ", column " + std::to_string(i % w.cols) + ")");
    }
  }

  // The scale: transformers' block-wise weight_scale_inv, else weight_scale.
  std::string scale_name = prefix + ".weight_scale_inv";
  if (scheme != nullptr || find(scale_name) == nullptr) scale_name = prefix + ".weight_scale";
  const Tensor* s = find(scale_name);
  if (s == nullptr) return bad(scale_name, "is missing (the FP8 Linear needs it)");
  if (std::find(kScaleDTypes.begin(), kScaleDTypes.end(), s->dtype) == kScaleDTypes.end()) {
    return bad(scale_name, "has dtype " + std::string(dtype_name(s->dtype)) +
                               ", expected F32, BF16 or F16 (E8M0 / MX scales are not built)");
  }
  if (s->rank() > 2) return bad(scale_name, "has shape " + dims(*s) + ", expected at most 2 dims");
  // The block each scale covers: from the config where it names one, else from the shape.
  int64_t block_rows = 0, block_cols = 0;
  if (scheme != nullptr && scheme->strategy == "block") {
    block_rows = scheme->block_rows;
    block_cols = scheme->block_cols;
  } else if (scheme != nullptr && scheme->strategy == "group") {
    block_rows = 1;
    block_cols = scheme->group_size;
  } else if (scheme == nullptr && q.fp8_block_rows > 0) {
    block_rows = q.fp8_block_rows;
    block_cols = q.fp8_block_cols;
  } else if (scheme != nullptr ? scheme->strategy == "tensor" : s->numel() == 1) {
    block_rows = w.rows;
    block_cols = w.cols;
  } else {  // one per row
    block_rows = 1;
    block_cols = w.cols;
  }
  const int64_t grid_rows = (w.rows + block_rows - 1) / block_rows;
  w.grid_cols = (w.cols + block_cols - 1) / block_cols;
  w.block_rows = block_rows;
  w.block_cols = block_cols;
  // The stored shape must be that grid ([N] for [N, 1] and any shape of one value are accepted).
  const bool one_value = grid_rows * w.grid_cols == 1 && s->numel() == 1;
  const bool grid_2d = s->rank() == 2 && s->dim(0) == grid_rows && s->dim(1) == w.grid_cols;
  const bool rows_1d = s->rank() == 1 && w.grid_cols == 1 && s->dim(0) == grid_rows;
  if (!one_value && !grid_2d && !rows_1d) {
    return bad(scale_name, "has shape " + dims(*s) + ", expected [" + std::to_string(grid_rows) +
                               ", " + std::to_string(w.grid_cols) + "] for " + dims(*t) +
                               " weights in blocks of " + std::to_string(block_rows) + " x " +
                               std::to_string(block_cols) + " (mismatched scale or block size)");
  }
  w.scales.resize(static_cast<size_t>(grid_rows * w.grid_cols));
  for (int64_t i = 0; i < grid_rows * w.grid_cols; ++i) {
    const float v = scale_at(*s, i);
    if (!std::isfinite(v)) return bad(scale_name, "holds a non-finite scale");
    w.scales[static_cast<size_t>(i)] = v;
  }
  return w;
}

}  // namespace lm
