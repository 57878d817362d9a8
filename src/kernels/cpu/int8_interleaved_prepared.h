// One block of 32 of an activation row prepared for the interleaved int8 GEMM
// (int8_interleaved.h), the same bytes for every ISA's GEMM: one cache line holding the block's
// int8 values, its scale and the sums the GEMM's zero points and minimums need.
#pragma once

#include <cstdint>

namespace lm::kernels {

struct alignas(64) Int8InterleavedBlock {
  int8_t q[32];
  float d;
  // The int32 lanes of a weight word see elements 8c + 4h + [0, 4) of word c < 4 (h: the lane's
  // half of a row's pair of lanes): minus the sum of those 16 activations per h, and d times it.
  int32_t neg_sum[2];
  float dsum[2];
  // The same negated sums over words 0 and 1 only (the first 16-element scale of Q6_K, Q3_K and
  // Q2_K).
  int32_t neg_sum_lo[2];
  // In block 4j of a row (0 in the others and in a last group of fewer than 4): d times the
  // activations' sum over blocks 4j..4j+3, their BlockQ8Act::s added in order, for Q4_Z128's
  // zero point (one per 128 elements).
  float dsum4;
};
static_assert(sizeof(Int8InterleavedBlock) == 64);

}  // namespace lm::kernels
