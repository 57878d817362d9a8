// Readers of one quantized Linear's tensors in each pre-quantized checkpoint format, into the
// integer form (integer_linear.h). Every tensor is hostile: dtype, rank, shape against its
// siblings and the config, g_idx entries and zero-points are checked, and an error names the
// tensor. The layouts (for a Linear of N = out_features rows and K = in_features columns, G
// groups, b bits, p = 32 / b values per int32, value j of a word in bits [b * j, b * j + b)):
//   GPTQ  qweight I32 [K / p, N]: column k of row n in word [k / p][n], value k % p;
//         qzeros I32 [G, N / p]: row n's zero in word [g][n / p], value n % p; scales [G, N];
//         g_idx I32 [K] (absent: k / group_size). v1 ("gptq"): the stored word is the zeros'
//         word minus 0x11111111 (b = 4) or 0x01010101 (b = 8), so it is read back by adding
//         that constant to the whole word (gptqmodel's conversion; it carries between values
//         where AutoGPTQ's per-value "+ 1" would give 16 for a stored 15).
//   AWQ   (GEMM) qweight I32 [K, N / 8]: row n's column k in word [k][n / 8], value
//         kAwqNibble[n % 8] ({0, 4, 1, 5, 2, 6, 3, 7}: AutoAWQ packs in the order
//         {0, 2, 4, 6, 1, 3, 5, 7}); qzeros I32 [G, N / 8] the same; scales [G, N].
//   compressed-tensors pack-quantized: weight_packed I32 [N, ceil(K * b / 32)], element k of a
//         row at bit k * b of the row's little-endian words, stored as q + 2^(b-1) (q signed);
//         weight_shape [2] = {N, K}; weight_scale [N, G] (group), [N, 1] (channel) or [1]
//         (tensor); weight_zero_point (asymmetric) I32 [ceil(N * b / 32), G] packed the same way
//         along the rows (dim 0); weight_g_idx I32 [K] (activation order) optional.
//   compressed-tensors int-quantized / naive-quantized: weight I8 [N, K] = q; weight_scale as
//         above; weight_zero_point I8/I32 [N, G] unpacked (asymmetric).
//   FP8 (compressed-tensors float-quantized / naive-quantized with float weights, "fp8",
//         "fbgemm_fp8"): weight F8_E4M3 (or F8_E5M2) [N, K]; its scale weight_scale_inv (the
//         multiplier, despite the name: transformers' block-wise layout) or weight_scale,
//         F32/BF16/F16: one value per tensor ([], [1], [1, 1]), per row ([N], [N, 1]), per group
//         of G columns ([N, ceil(K / G)]) or per block of R x C ([ceil(N / R), ceil(K / C)]).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "loader/fp8_linear.h"
#include "loader/integer_linear.h"
#include "loader/quantization_config.h"
#include "tensor/tensor.h"

namespace lm {

// The checkpoint's tensor of that name, or null.
using TensorLookup = std::function<const Tensor*(const std::string& name)>;

// `prefix` is the module's name (e.g. model.layers.0.self_attn.q_proj). `reuse`: memory for the
// integers, e.g. an earlier IntegerLinear's q (its values are ignored), so that a run of modules
// does not fault in and zero fresh pages for each (most of a 7B checkpoint's load otherwise).
Result<IntegerLinear> read_gptq_linear(const QuantizationConfig& q, const std::string& prefix,
                                       const TensorLookup& find, std::vector<int16_t> reuse = {});
Result<IntegerLinear> read_awq_linear(const QuantizationConfig& q, const std::string& prefix,
                                      const TensorLookup& find, std::vector<int16_t> reuse = {});
Result<IntegerLinear> read_compressed_tensors_linear(const QuantizationConfig& q,
                                                     const CompressedTensorsScheme& scheme,
                                                     const std::string& prefix,
                                                     const TensorLookup& find,
                                                     std::vector<int16_t> reuse = {});
// `scheme`: the module's compressed-tensors group, or null for "fp8" / "fbgemm_fp8".
Result<Fp8Linear> read_fp8_linear(const QuantizationConfig& q,
                                  const CompressedTensorsScheme* scheme, const std::string& prefix,
                                  const TensorLookup& find);

}  // namespace lm
