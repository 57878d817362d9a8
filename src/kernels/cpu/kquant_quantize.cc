// GGML's reference K-quant quantizers (what llama.cpp's llama-quantize writes without an
// importance matrix): each super-block's scales are fitted by a weighted least-squares search,
// the scales themselves quantized to 6 (Q4_K/Q5_K) or 8 (Q6_K) bits, and the values re-rounded
// against the stored scales. Every float operation is done in the reference's order, so the
// blocks are byte for byte llama.cpp's (tests/kernels/kquant_quantize_test.cc); this file is
// built without FMA contraction (-ffp-contract=off), as GGML's baseline build is.
#include "kernels/cpu/kquant_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

using kquant::AffineFit;
using kquant::AffineSearch;
using kquant::SymmetricFit;
constexpr int kGroup = kquant::kGroupSize;
constexpr int kSubGroup = kquant::kSubGroupSize;
constexpr float kAllZero = 1e-15f;  // a group whose largest magnitude is below this is zero
constexpr int kScaleLevels = 63;    // 6-bit scales and mins

// Round half to even, as GGML's nearest_int (its magic-number trick) for |x| < 2^22.
int nearest(float x) { return static_cast<int>(std::nearbyint(x)); }

int clamp(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

// The affine fit value ~= scale * q - offset (q in [0, levels]) of one group for Q4_K/Q5_K:
// starts from the min-max grid, then tries nsteps + 1 slightly wider or narrower grids (from the
// best fit's offset so far, as GGML does), each followed by the weighted least-squares scale and
// offset of its rounding, keeping the one of least weighted squared error. An offset that would be
// negative is forced to zero (values all positive use the full range from 0). Returns the scale;
// `offset` gets the (non-negative) offset and `q` the chosen levels.
float fit_affine_group(const float* x, const float* w, int levels, float rmin, float rdelta,
                       int nsteps, uint8_t* q, float* offset) {
  float min = x[0];
  float max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < kGroup; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::memset(q, 0, kGroup);
    *offset = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(levels) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < kGroup; ++i) {
    q[i] = static_cast<uint8_t>(clamp(nearest(iscale * (x[i] - min)), 0, levels));
    float diff = scale * q[i] + min - x[i];
    diff = diff * diff;
    best_error += w[i] * diff;
  }
  uint8_t trial[kGroup];
  for (int step = 0; step <= nsteps; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(levels)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < kGroup; ++i) {
      const int l = clamp(nearest(iscale * (x[i] - min)), 0, levels);
      trial[i] = static_cast<uint8_t>(l);
      const float lf = static_cast<float>(l);
      sum_l += w[i] * lf;
      sum_l2 += w[i] * lf * lf;
      sum_xl += w[i] * lf * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < kGroup; ++i) {
      float diff = this_scale * trial[i] + this_min - x[i];
      diff = diff * diff;
      error += w[i] * diff;
    }
    if (error < best_error) {
      std::memcpy(q, trial, kGroup);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *offset = -min;
  return scale;
}

// The symmetric fit value ~= scale * (q - levels) of one Q6_K sub-group (q in [0, 2 levels)),
// weighted by x^2: the grid through the value of largest magnitude, then 18 grids around it, each
// with its least-squares scale, keeping the best. Returns the scale (0 for an all-zero group).
float fit_symmetric_group(const float* x, int levels, int8_t* q) {
  float amax = 0;
  float max = 0;
  for (int i = 0; i < kSubGroup; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kAllZero) {
    std::memset(q, 0, kSubGroup);
    return 0.0f;
  }
  // Sums of the weighted fit at inverse scale `iscale`, the levels written to `out` if given.
  const auto fit = [&](float iscale, float& sum_lx, float& sum_l2, int8_t* out) {
    sum_lx = sum_l2 = 0;
    for (int i = 0; i < kSubGroup; ++i) {
      const int l = clamp(nearest(iscale * x[i]), -levels, levels - 1);
      if (out) out[i] = static_cast<int8_t>(l + levels);
      const float lf = static_cast<float>(l);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * lf;
      sum_l2 += w * lf * lf;
    }
  };
  float sum_lx, sum_l2;
  fit(static_cast<float>(-levels) / max, sum_lx, sum_l2, q);
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    const float iscale = -(static_cast<float>(levels) + 0.1f * static_cast<float>(step)) / max;
    fit(iscale, sum_lx, sum_l2, nullptr);
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      fit(iscale, sum_lx, sum_l2, q);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// Q4_K and Q5_K share everything but the levels, the search grid and the packing of the values:
// the scales and offsets quantized to 6 bits, the values rounded again against them.
void finish_affine_superblock(const float* x, int levels, AffineFit& fit, uint8_t* block) {
  float max_scale = 0;
  float max_offset = 0;
  for (int g = 0; g < kquant::kGroups; ++g) {
    max_scale = std::max(max_scale, fit.scales[g]);
    max_offset = std::max(max_offset, fit.offsets[g]);
  }
  const float inv_scale = max_scale > 0 ? kScaleLevels / max_scale : 0.0f;
  const float inv_offset = max_offset > 0 ? kScaleLevels / max_offset : 0.0f;
  uint8_t* packed = block + kquant::kScalesOffset;
  std::memset(packed, 0, 12);
  for (int g = 0; g < kquant::kGroups; ++g) {
    const auto ls =
        std::min<uint8_t>(kScaleLevels, static_cast<uint8_t>(nearest(inv_scale * fit.scales[g])));
    const auto lm =
        std::min<uint8_t>(kScaleLevels, static_cast<uint8_t>(nearest(inv_offset * fit.offsets[g])));
    if (g < 4) {
      packed[g] = ls;
      packed[g + 4] = lm;
    } else {  // the layout kquant::unpack_scales_k4 reads
      packed[g + 4] = static_cast<uint8_t>((ls & 0x0f) | ((lm & 0x0f) << 4));
      packed[g - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed[g] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  quant::store_f16(block, max_scale / kScaleLevels);
  quant::store_f16(block + 2, max_offset / kScaleLevels);
  uint8_t sc[kquant::kGroups], mn[kquant::kGroups];
  kquant::unpack_scales_k4(packed, sc, mn);
  for (int g = 0; g < kquant::kGroups; ++g) {
    const float d = quant::load_f16(block) * sc[g];
    if (d == 0) continue;  // the search's levels stay
    const float dm = quant::load_f16(block + 2) * mn[g];
    for (int i = 0; i < kGroup; ++i) {
      fit.q[kGroup * g + i] =
          static_cast<uint8_t>(clamp(nearest((x[kGroup * g + i] + dm) / d), 0, levels));
    }
  }
}

void fit_affine(const float* x, const AffineSearch& search, AffineFit& fit, Isa isa) {
  if (isa >= Isa::kAvx2 && kquant::fit_groups_avx2_built()) {
    kquant::fit_affine_groups_avx2(x, search, fit);
  } else {
    kquant::fit_affine_groups(x, search, fit);
  }
}

void fit_symmetric(const float* x, SymmetricFit& fit, Isa isa) {
  if (isa >= Isa::kAvx2 && kquant::fit_groups_avx2_built()) {
    kquant::fit_symmetric_groups_avx2(x, fit);
  } else {
    kquant::fit_symmetric_groups(x, fit);
  }
}

}  // namespace

namespace kquant {

void fit_affine_groups(const float* x, const AffineSearch& search, AffineFit& fit) {
  for (int g = 0; g < kquant::kGroups; ++g) {
    const float* xg = x + kGroup * g;
    // Weights: the group's RMS plus each value's magnitude (larger values matter more).
    float sum_x2 = 0;
    for (int i = 0; i < kGroup; ++i) sum_x2 += xg[i] * xg[i];
    const float av_x = std::sqrt(sum_x2 / kGroup);
    float w[kGroup];
    for (int i = 0; i < kGroup; ++i) w[i] = av_x + std::fabs(xg[i]);
    fit.scales[g] = fit_affine_group(xg, w, search.levels, search.rmin, 0.1f, search.steps,
                                     fit.q + kGroup * g, &fit.offsets[g]);
  }
}

void fit_symmetric_groups(const float* x, SymmetricFit& fit) {
  for (int s = 0; s < kquant::kSubGroups; ++s) {
    fit.scales[s] = fit_symmetric_group(x + kSubGroup * s, 32, fit.q + kSubGroup * s);
  }
}

}  // namespace kquant

namespace {

// Q4_K and Q5_K rows: the same fit and the same nibbles (each 64 values: the first 32 in the low
// nibbles of 32 bytes, the next 32 in the high ones); Q5_K (qh_offset >= 0) keeps the fifth bit
// of value l of group g in bit g of qh[l].
void quantize_row_affine(const float* src, void* dst, int64_t k, Isa isa,
                         const AffineSearch& search, int64_t block_bytes, int qs_offset,
                         int qh_offset) {
  LM_CHECK(k % kquant::kSuperBlock == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / kquant::kSuperBlock; ++b, src += kquant::kSuperBlock) {
    uint8_t* block = out + b * block_bytes;
    AffineFit fit;
    fit_affine(src, search, fit, isa);
    finish_affine_superblock(src, search.levels, fit, block);
    const uint8_t* q = fit.q;
    uint8_t* qh = qh_offset >= 0 ? block + qh_offset : nullptr;
    uint8_t* qs = block + qs_offset;
    if (qh) std::memset(qh, 0, 32);
    for (int j = 0, g = 0; j < kquant::kSuperBlock; j += 64, g += 2, qs += 32) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[j + l];
        const int hi = q[j + l + 32];
        if (qh) qh[l] |= static_cast<uint8_t>(((lo >> 4) << g) | ((hi >> 4) << (g + 1)));
        qs[l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      }
    }
  }
}

}  // namespace

void quantize_row_q4_k(const float* src, void* dst, int64_t k, Isa isa) {
  quantize_row_affine(src, dst, k, isa, kquant::kQ4_KSearch, kquant::kQ4_KBytes,
                      kquant::kQ4_KQsOffset, -1);
}

void quantize_row_q5_k(const float* src, void* dst, int64_t k, Isa isa) {
  quantize_row_affine(src, dst, k, isa, kquant::kQ5_KSearch, kquant::kQ5_KBytes,
                      kquant::kQ5_KQsOffset, kquant::kQ5_KQhOffset);
}

void quantize_row_q6_k(const float* src, void* dst, int64_t k, Isa isa) {
  LM_CHECK(k % kquant::kSuperBlock == 0);
  constexpr int kSubGroups = kquant::kSubGroups;
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / kquant::kSuperBlock; ++b, src += kquant::kSuperBlock) {
    uint8_t* block = out + b * kquant::kQ6_KBytes;
    SymmetricFit fit;
    fit_symmetric(src, fit, isa);
    int8_t* q = fit.q;
    const float* scales = fit.scales;
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int s = 0; s < kSubGroups; ++s) {
      if (std::fabs(scales[s]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[s]);
        max_scale = scales[s];
      }
    }
    std::memset(block, 0, kquant::kQ6_KBytes);
    if (max_abs_scale < kAllZero) continue;  // zero block, d = 0
    const float iscale = -128.0f / max_scale;
    quant::store_f16(block + kquant::kQ6_KDOffset, 1 / iscale);
    auto* stored = reinterpret_cast<int8_t*>(block + kquant::kQ6_KScalesOffset);
    for (int s = 0; s < kSubGroups; ++s) {
      stored[s] = static_cast<int8_t>(std::min(127, nearest(iscale * scales[s])));
    }
    for (int s = 0; s < kSubGroups; ++s) {
      const float d = quant::load_f16(block + kquant::kQ6_KDOffset) * stored[s];
      if (d == 0) continue;
      for (int i = 0; i < kSubGroup; ++i) {
        const int l = clamp(nearest(src[kSubGroup * s + i] / d), -32, 31);
        q[kSubGroup * s + i] = static_cast<int8_t>(l + 32);
      }
    }
    // Each 128 values: four runs of 32, low nibbles of runs 0/2 and 1/3 sharing ql bytes, the
    // four 2-bit high parts in one qh byte (the layout kquant::group_values_q6_k reads).
    uint8_t* ql = block;
    uint8_t* qh = block + kquant::kQ6_KQhOffset;
    for (int j = 0; j < kquant::kSuperBlock; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const auto v = [&](int run) { return static_cast<uint8_t>(q[j + l + 32 * run]); };
        ql[l] = static_cast<uint8_t>((v(0) & 0x0f) | ((v(2) & 0x0f) << 4));
        ql[l + 32] = static_cast<uint8_t>((v(1) & 0x0f) | ((v(3) & 0x0f) << 4));
        qh[l] = static_cast<uint8_t>((v(0) >> 4) | ((v(1) >> 4) << 2) | ((v(2) >> 4) << 4) |
                                     ((v(3) >> 4) << 6));
      }
    }
  }
}

}  // namespace lm::kernels
