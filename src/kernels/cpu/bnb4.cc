// bitsandbytes' 4-bit quantizer (quantize_4bit with compress_statistics off, its CPU reference):
// each block of 64 values scaled by 1 / absmax, clamped to [-1, 1], and given the code whose
// interval between neighbouring codes' midpoints holds it (torch.bucketize: a value on a midpoint
// takes the lower code).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/cpu/bnb4_blocks.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

void quantize_row_bnb4(const float* code, const uint8_t* order, const float* src, void* dst,
                       int64_t k) {
  LM_CHECK(k % bnb4::kBlock == 0);
  float midpoints[15];
  for (int i = 0; i < 15; ++i) midpoints[i] = (code[order[i]] + code[order[i + 1]]) / 2;
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / bnb4::kBlock; ++b, src += bnb4::kBlock) {
    uint8_t* block = out + b * bnb4::kBlockBytes;
    float absmax = 0;
    for (int i = 0; i < bnb4::kBlock; ++i) absmax = std::max(absmax, std::fabs(src[i]));
    std::memcpy(block, &absmax, sizeof(absmax));
    const float inv = 1.0f / std::max(absmax, 1e-38f);
    float scaled[bnb4::kBlock];
    for (int i = 0; i < bnb4::kBlock; ++i) scaled[i] = std::clamp(src[i] * inv, -1.0f, 1.0f);
    // The midpoints strictly below each value, counted without branches (the compiler vectorizes
    // the inner loop over the block).
    int32_t below[bnb4::kBlock] = {};
    for (float midpoint : midpoints) {
      for (int i = 0; i < bnb4::kBlock; ++i) below[i] += midpoint < scaled[i] ? 1 : 0;
    }
    uint8_t q[bnb4::kBlock];
    for (int i = 0; i < bnb4::kBlock; ++i) q[i] = order[below[i]];
    for (int i = 0; i < bnb4::kBlock / 2; ++i) {
      block[bnb4::kQsOffset + i] = static_cast<uint8_t>((q[2 * i] << 4) | q[2 * i + 1]);
    }
  }
}

}  // namespace

void quantize_row_nf4(const float* src, void* dst, int64_t k) {
  quantize_row_bnb4(bnb4::kNF4Code, bnb4::kNF4Order, src, dst, k);
}

void quantize_row_fp4(const float* src, void* dst, int64_t k) {
  quantize_row_bnb4(bnb4::kFP4Code, bnb4::kFP4Order, src, dst, k);
}

}  // namespace lm::kernels
