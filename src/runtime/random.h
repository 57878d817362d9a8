// The sampler's seeded generator: xoshiro256** with a splitmix64-expanded seed and a uniform double
// from the top 53 bits. Fully specified here (no std:: distributions, whose output differs between
// standard libraries), so one seed gives the same stream on every machine.
#pragma once

#include <cstdint>

namespace lm {

// Seed expander recommended by xoshiro's authors; also a fine generator on its own.
inline uint64_t splitmix64_next(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Random {
 public:
  explicit Random(uint64_t seed) {
    uint64_t sm = seed;
    for (uint64_t& word : state_) word = splitmix64_next(sm);
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1): every multiple of 2^-53 equally likely.
  double next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t state_[4];
};

}  // namespace lm
