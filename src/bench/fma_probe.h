// The FMA peak probe, written once against a lane policy (kernels/cpu/lane_math.h): each
// fma_probe_<isa>.cc instantiates it with its own instruction flags.
#pragma once

#include <cstdint>

#include "kernels/cpu/lane_math.h"

namespace lm::fma_probe {

// `iterations` rounds of 10 independent accumulator chains, which cover the FMA latency (4-5
// cycles) times two FMA ports; returns the flops done. `sink` keeps the result alive.
template <typename Lanes>
double run(int64_t iterations, float* sink) {
  constexpr int kChains = 10;
  typename Lanes::Reg acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Lanes::set1(static_cast<float>(c));
  const typename Lanes::Reg a = Lanes::set1(0.999999f);
  const typename Lanes::Reg b = Lanes::set1(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 10
    for (int c = 0; c < kChains; ++c) acc[c] = Lanes::fmadd(acc[c], a, b);
  }
  typename Lanes::Reg sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = Lanes::add(sum, acc[c]);
  alignas(64) float lanes[Lanes::kLanes];
  Lanes::store(lanes, sum);
  for (float lane : lanes) *sink += lane;
  return static_cast<double>(iterations) * kChains * Lanes::kLanes * 2;
}

}  // namespace lm::fma_probe
