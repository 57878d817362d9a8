// The scale searches of GGML's K-quant quantizers (kquant_quantize.cc), split from the block
// packing so that a vector version can do the expensive part: the search tries 16-22 grids per
// group, ~200 float operations per weight, which made quantizing a 7B model at load take minutes.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/kquant_blocks.h"

namespace lm::kernels::kquant {

inline constexpr int kGroupSize = 32;     // Q4_K/Q5_K values per 6-bit scale
inline constexpr int kSubGroupSize = 16;  // Q6_K values per int8 scale
inline constexpr int kSubGroups = static_cast<int>(kSuperBlock) / kSubGroupSize;

// The affine fit value ~= scale * q - offset (q in [0, levels]) of each group of one Q4_K/Q5_K
// super-block, before the scales are themselves quantized.
struct AffineFit {
  float scales[kGroups];
  float offsets[kGroups];
  uint8_t q[kSuperBlock];
};

// The symmetric fit value ~= scale * (q - 32) (q in [0, 63]) of each 16-value sub-group of one
// Q6_K super-block.
struct SymmetricFit {
  float scales[kSubGroups];
  int8_t q[kSuperBlock];
};

// Search parameters: Q4_K (levels 15) and Q5_K (levels 31) differ only in these.
struct AffineSearch {
  int levels;
  float rmin;
  int steps;
};
inline constexpr AffineSearch kQ4_KSearch{15, -1.0f, 20};
inline constexpr AffineSearch kQ5_KSearch{31, -0.5f, 15};

// The searches, scalar (kquant_quantize.cc) and with one group per AVX2 lane
// (kquant_quantize_avx2.cc): the same float operations in the same order in every lane, so the
// same bits (both files are built without FMA contraction).
void fit_affine_groups(const float* x, const AffineSearch& search, AffineFit& fit);
void fit_symmetric_groups(const float* x, SymmetricFit& fit);
// Whether the AVX2 versions are built (x86 only).
bool fit_groups_avx2_built();
void fit_affine_groups_avx2(const float* x, const AffineSearch& search, AffineFit& fit);
void fit_symmetric_groups_avx2(const float* x, SymmetricFit& fit);

}  // namespace lm::kernels::kquant
