// The fp32 vector kernels of the kernel table (IsaKernels::dot_f32, axpy_f32, scale_f32) written
// once against the lane_math.h policies; the scalar table keeps its own in-order loops as the
// reference.
#pragma once

#include <cstdint>

#include "kernels/cpu/lane_math.h"

namespace lm::kernels::lanes {
namespace {

// sum over i < n of a[i] * b[i]: four accumulators (FMA latency), then one, then the tail one
// product at a time after the horizontal sum.
template <typename V>
float dot_f32(const float* a, const float* b, int64_t n) {
  constexpr int64_t L = V::kLanes;
  auto acc0 = V::zero();
  auto acc1 = V::zero();
  auto acc2 = V::zero();
  auto acc3 = V::zero();
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    acc0 = V::fmadd(V::load(a + i), V::load(b + i), acc0);
    acc1 = V::fmadd(V::load(a + i + L), V::load(b + i + L), acc1);
    acc2 = V::fmadd(V::load(a + i + 2 * L), V::load(b + i + 2 * L), acc2);
    acc3 = V::fmadd(V::load(a + i + 3 * L), V::load(b + i + 3 * L), acc3);
  }
  for (; i + L <= n; i += L) acc0 = V::fmadd(V::load(a + i), V::load(b + i), acc0);
  float sum = V::hsum(V::add(V::add(acc0, acc1), V::add(acc2, acc3)));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y[i] += a * x[i]
template <typename V>
void axpy_f32(float a, const float* x, float* y, int64_t n) {
  const auto va = V::set1(a);
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes)
    V::store(y + i, V::fmadd(va, V::load(x + i), V::load(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

// y[i] *= a
template <typename V>
void scale_f32(float a, float* y, int64_t n) {
  const auto va = V::set1(a);
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) V::store(y + i, V::mul(va, V::load(y + i)));
  for (; i < n; ++i) y[i] *= a;
}

}  // namespace
}  // namespace lm::kernels::lanes
