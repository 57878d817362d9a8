// The form every pre-quantized Linear (GPTQ, AWQ, compressed-tensors) reduces to once its packs
// are read: integers times a scale per (row, group of columns). And its exact repack into the GGML
// block formats the int8-activation kernels stream, or into fp32 rows where no block format
// holds it exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "tensor/tensor.h"

namespace lm {

// w[n][k] = scales[n * num_groups + group_of_col[k]] * q[n * cols + k]
// where q is the stored integer minus its zero-point (GPTQ/AWQ s * (q - z), compressed-tensors
// (q - zp) * s), so a 4-bit format's q lies in [-15, 15] and an 8-bit one's in [-255, 255].
struct IntegerLinear {
  int64_t rows = 0;                   // out_features
  int64_t cols = 0;                   // in_features
  int64_t num_groups = 0;             // column groups (1: per channel)
  std::vector<int16_t> q;             // [rows, cols]
  std::vector<int32_t> group_of_col;  // [cols], each in [0, num_groups)
  std::vector<float> scales;          // [rows, num_groups], the stored fp16/bf16/fp32 values
};

// A repacked weight and the memory its view (and its column order) points into.
struct RepackedLinear {
  Tensor weight;  // [rows, cols]
  std::shared_ptr<const void> storage;
};

// The weight in the smallest block format that holds every value exactly, which needs every
// scale exactly an fp16 (the blocks' d) and each block inside one group:
//   every block of 128 columns spanning at most 16 levels (4-bit with groups of 128, a multiple
//   of it, or one per row: every GPTQ/AWQ/CT 4-bit checkpoint of those group sizes), rows a
//   multiple of 8 (the int8 kernels read it interleaved)
//                     -> Q4_Z128, d = s, z = the block's zero point, nibble = q + z (4.25 bits)
// otherwise, with each block of 32 columns inside one group (groups of 32 or 64):
//   q in [-8, 7]      -> Q4_0, d = s, nibble = q + 8       (GPTQ/AWQ/CT symmetric 4-bit)
//   q in [-16, 15]    -> Q5_0, d = s, q5 = q + 16          (asymmetric 4-bit: q - z)
//   q in [-128, 127]  -> Q8_0, d = s, qs = q               (symmetric 8-bit)
// Q4_1 (d * nibble + m) is not used: m = -s * z is not an fp16 in general.
// Act-order (GPTQ desc_act) weights, whose groups are scattered over the columns, are first
// regrouped: the columns stably sorted by group (each group then adjacent, in whole blocks when
// the group sizes are multiples of 32) and the weight's column_order set, so the Linear reads its
// input in that order (ops::linear gathers the activations; a permutation is exact). Otherwise fp32
// rows
// of s * q (exact for fp16/bf16 scales, which need at most 11 + 9 significant bits; fp32 scales
// round once, as the libraries' fp32 dequantization does): 4 bytes a weight, documented as slow.
// `name` is the weight's, for errors (a non-finite scale).
Result<RepackedLinear> repack_integer_linear(const IntegerLinear& w, const std::string& name);

}  // namespace lm
