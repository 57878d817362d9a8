// AVX2 helpers shared by every file built with -mavx2 (kernels_avx2, int8_dot_avx2, kquants_avx2,
// kernels_avx512_vnni): the fp16 scale of a GGML block, the sum of 8 lanes, and the unpacking of
// 32-element 4- and 5-bit blocks into one register of 32 bytes in element order. Include only from
// files built with -mavx2. NOTE: the helpers are `static` on purpose: an external-linkage inline
// copy compiled with AVX2 could be the one the linker keeps for every caller.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/lane_math.h"

namespace lm::kernels::avx2 {

// An fp16 field of a block (unaligned: blocks are 18-34 bytes).
static inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

// The sum of 8 lanes: the lane policy's, so the row kernels and the lane ops reduce alike.
static inline float hsum(__m256 v) { return lanes::Ymm::hsum(v); }

// 16 bytes of nibbles as 32 bytes: low nibbles (elements 0-15) then high nibbles (16-31).
static inline __m256i nibbles_to_bytes(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both =
      _mm256_insertf128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// Q5 values in [0, 31]: the nibbles with bit i of the 32-bit qh as element i's fifth bit.
static inline __m256i q5_to_bytes(const uint8_t* qh_bytes, const uint8_t* qs) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  // Byte i gets qh's byte i / 8, then keeps only bit i % 8: 0xff where element i's bit is set.
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                          _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                             0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_or_si256(nibbles_to_bytes(qs), _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
}

}  // namespace lm::kernels::avx2
