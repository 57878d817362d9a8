// BF16 pair panels (bf16_pairs.h): the layout and its packing, the activation pairs, the scalar
// reference against vdpbf16ps itself (normal and subnormal values), every level's pair GEMM
// against the reference bit for bit, and matmul_bf16_pairs' batch invariance: a row's outputs are
// the same bits alone, in any batch, over any thread split and across the depth and row blocks.
#include "kernels/cpu/bf16_pairs.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/panels16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace lm::kernels {
namespace {

using testing::random_floats;
using testing::supported_isas;

std::vector<uint16_t> random_bf16(int64_t count, uint32_t seed) {
  const auto values = random_floats(count, seed);
  std::vector<uint16_t> h(values.size());
  for (size_t i = 0; i < values.size(); ++i) h[i] = fp32_to_bf16(values[i]);
  return h;
}

std::vector<uint16_t> pairs_of(const std::vector<uint16_t>& rows, int64_t n, int64_t k) {
  std::vector<uint16_t> panels(rows.size());
  pack_bf16_pairs(rows.data(), 2 * k, n, k, panels.data());
  return panels;
}

std::vector<uint32_t> activation_pairs(const std::vector<float>& x, int64_t m, int64_t k) {
  std::vector<uint32_t> pairs(static_cast<size_t>(m * k / 2));
  for (int64_t i = 0; i < m; ++i) bf16_pairs_of(x.data() + i * k, k, pairs.data() + i * k / 2);
  return pairs;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
        << "element " << i << ": " << got[i] << " vs " << want[i];
}

#if defined(__x86_64__)
// One vdpbf16ps: lane c of acc plus lane c's pair of w times the broadcast pair x (this file is not
// built with AVX512_BF16 on: the instruction is enabled for this function only).
__attribute__((target("avx512f,avx512bf16"))) void vdpbf16ps(const float* acc, uint32_t x,
                                                             const uint16_t* w, float* out) {
  const __m512i wv = _mm512_loadu_si512(w);
  const __m512i xv = _mm512_set1_epi32(static_cast<int>(x));
  _mm512_storeu_ps(out, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), reinterpret_cast<__m512bh>(xv),
                                         reinterpret_cast<__m512bh>(wv)));
}
#endif

// The levels whose tables have the pair GEMM.
std::vector<Isa> pair_isas() {
  std::vector<Isa> isas;
  for (Isa isa : supported_isas()) {
    if (has_bf16_pair_matmul(isa)) isas.push_back(isa);
  }
  return isas;
}

TEST(Bf16Pairs, OnlyWholePanelsOfBf16RowsOfEvenLength) {
  EXPECT_TRUE(can_bf16_pairs(RowFormat::kBF16, 32, 2));
  EXPECT_TRUE(can_bf16_pairs(RowFormat::kBF16, 16, 576));
  EXPECT_FALSE(can_bf16_pairs(RowFormat::kBF16, 16, 7));
  EXPECT_FALSE(can_bf16_pairs(RowFormat::kBF16, 24, 8));
  EXPECT_FALSE(can_bf16_pairs(RowFormat::kF16, 16, 8));
  EXPECT_FALSE(can_bf16_pairs(RowFormat::kBF16, 16, 0));
}

TEST(Bf16Pairs, OnlyAvx512Bf16HasThePairGemm) {
  for (Isa isa : supported_isas())
    EXPECT_EQ(has_bf16_pair_matmul(isa), isa == Isa::kAvx512Bf16) << isa_name(isa);
}

TEST(Bf16Pairs, PackPutsEachRowsPairsSideBySideAndWorksInPlace) {
  const int64_t n = 32, k = 6, pad = 4;
  std::vector<uint8_t> rows(static_cast<size_t>(n * (2 * k + pad)), 0xee);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) {
      const auto v = static_cast<uint16_t>(j * 100 + p);
      std::memcpy(rows.data() + j * (2 * k + pad) + 2 * p, &v, 2);
    }
  }
  std::vector<uint16_t> panels(static_cast<size_t>(n * k));
  pack_bf16_pairs(rows.data(), 2 * k + pad, n, k, panels.data());
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) {
      const int64_t g = j / kPanel16Rows, c = j % kPanel16Rows;
      ASSERT_EQ(panels[static_cast<size_t>(g * k * kPanel16Rows + (p / 2) * 32 + 2 * c + p % 2)],
                j * 100 + p);
    }
  }
  std::vector<uint16_t> in_place(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) in_place[static_cast<size_t>(j * k + p)] = j * 100 + p;
  }
  pack_bf16_pairs(in_place.data(), 2 * k, n, k, in_place.data());
  EXPECT_EQ(in_place, panels);
  // And back, one row at a time.
  const int64_t k2 = 38;
  const auto values = random_bf16(48 * k2, 3);
  const auto packed = pairs_of(values, 48, k2);
  std::vector<float> row(static_cast<size_t>(k2));
  for (int64_t j : {0, 15, 16, 47}) {
    bf16_pairs_row(packed.data(), k2, j, row.data());
    for (int64_t p = 0; p < k2; ++p)
      ASSERT_EQ(row[p], bf16_to_fp32(values[static_cast<size_t>(j * k2 + p)]));
  }
}

TEST(Bf16Pairs, ActivationPairsAreTheValuesRoundedToBf16) {
  const std::vector<float> x = {1.0f, -2.5f, 1.00390625f, 1.01171875f, 3.0e38f, -1e-40f};
  std::vector<uint32_t> pairs(3);
  bf16_pairs_of(x.data(), 6, pairs.data());
  EXPECT_EQ(pairs[0], 0x3f80u | 0xc020u << 16);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1); 1 + 3 * 2^-8 rounds up to 1 + 2^-6.
  EXPECT_EQ(pairs[1], 0x3f80u | 0x3f82u << 16);
  EXPECT_EQ(pairs[2] & 0xffffu, fp32_to_bf16(3.0e38f));
  EXPECT_EQ(pairs[2] >> 16, fp32_to_bf16(-1e-40f));
}

// Every level's conversion of activation rows gives the reference's bits: ties to even, NaNs
// made quiet, infinities, the largest fp32 subnormal rounding up to bf16's smallest normal, and
// lengths that leave a partial vector.
TEST(Bf16Pairs, EveryLevelsActivationPairsAreTheReferences) {
  std::vector<float> x = random_floats(262, 41);
  const uint32_t specials[] = {0x7fc00001u, 0xff800001u, 0x7f800000u, 0xff800000u, 0x007fffffu,
                               0x80000001u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x00000000u};
  for (size_t i = 0; i < std::size(specials); ++i) x[7 * i] = std::bit_cast<float>(specials[i]);
  for (int64_t k : {2, 14, 16, 30, 32, 262}) {
    std::vector<uint32_t> want(static_cast<size_t>(k / 2));
    bf16_pairs_of(x.data(), k, want.data());
    for (Isa isa : supported_isas()) {
      std::vector<uint32_t> got(want.size() + 1, 0xdeadbeefu);
      isa_kernels(isa).bf16_pairs_of(x.data(), k, got.data());
      for (int64_t q = 0; q < k / 2; ++q)
        ASSERT_EQ(got[q], want[q]) << isa_name(isa) << " k " << k << " pair " << q;
      EXPECT_EQ(got.back(), 0xdeadbeefu) << isa_name(isa) << " wrote past k " << k;
    }
  }
}

// The reference computes what vdpbf16ps computes, bit for bit, on normal values and on values
// around fp32's subnormal range (inputs read as zero, results flushed), where this CPU has it.
TEST(Bf16Pairs, ReferenceIsWhatVdpbf16psComputes) {
#if defined(__x86_64__)
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  std::mt19937 rng(7);
  for (int tiny = 0; tiny < 2; ++tiny) {
    for (int trial = 0; trial < 2000; ++trial) {
      // One pair step of one panel against one activation pair per lane: 16 lanes, each its own
      // accumulator, weights and activations.
      std::vector<uint16_t> rows(16 * 2);
      std::vector<uint32_t> x(1);
      std::vector<float> acc(16);
      std::uniform_int_distribution<int> mantissa(0, 0x7f), sign(0, 1), low(0, 20), high(100, 140);
      auto bf16 = [&](int exponent) {
        return static_cast<uint16_t>(sign(rng) << 15 | exponent << 7 | mantissa(rng));
      };
      for (auto& w : rows) w = bf16(tiny ? high(rng) : 120 + low(rng) % 14);
      std::vector<uint16_t> xs = {bf16(tiny ? low(rng) : 124 + low(rng) % 6),
                                  bf16(tiny ? low(rng) : 124 + low(rng) % 6)};
      x[0] = xs[0] | static_cast<uint32_t>(xs[1]) << 16;
      for (auto& a : acc) {
        const uint32_t bits = static_cast<uint32_t>(sign(rng)) << 31 |
                              static_cast<uint32_t>(tiny ? low(rng) % 3 : 120 + low(rng)) << 23 |
                              static_cast<uint32_t>(rng() & 0x7fffff);
        std::memcpy(&a, &bits, 4);
      }
      // Flushed as an earlier step would have left it.
      for (auto& a : acc)
        if (std::fpclassify(a) == FP_SUBNORMAL) a = std::copysign(0.0f, a);
      const auto panel = pairs_of(rows, 16, 2);
      std::vector<float> want = acc;
      bf16_pair_gemm_scalar(x.data(), 1, 1, panel.data(), 1, 2, 0, 1, want.data(), 16, true);
      // The instruction: lane c of the panel's step against the broadcast pair.
      std::vector<float> got(16);
      vdpbf16ps(acc.data(), x[0], panel.data(), got.data());
      SCOPED_TRACE("tiny=" + std::to_string(tiny) + " trial=" + std::to_string(trial));
      expect_same_bits(want, got);
    }
  }
#else
  GTEST_SKIP() << "not x86";
#endif
}

// The reference's outputs are the double-precision dot of the bf16-rounded values within fp32
// rounding, and every level's pair GEMM, over depth blocks accumulating in y, gives its bits for
// row counts around each register tile (14, 4, 2, 1) and panel counts around the two-panel tile.
TEST(Bf16Pairs, GemmOverDepthBlocksGivesTheReferenceBitsAtEveryLevel) {
  for (int64_t num_panels : {1, 2, 3}) {
    for (int64_t k : {2, 30, 300}) {
      for (int64_t m : {1, 2, 3, 4, 7, 13, 14, 15, 29}) {
        SCOPED_TRACE("panels=" + std::to_string(num_panels) + " k=" + std::to_string(k) +
                     " m=" + std::to_string(m));
        const int64_t n = num_panels * kPanel16Rows, pairs = k / 2, ldx = pairs + 1, ldy = n + 3;
        const auto rows = random_bf16(n * k, 21);
        const auto panels = pairs_of(rows, n, k);
        const auto xf = random_floats(m * k, 22);
        std::vector<uint32_t> x(static_cast<size_t>(m * ldx), 0xdeadbeef);
        for (int64_t i = 0; i < m; ++i) bf16_pairs_of(xf.data() + i * k, k, x.data() + i * ldx);
        std::vector<float> want(static_cast<size_t>(m * ldy), -1.0f);
        bf16_pair_gemm_scalar(x.data(), ldx, m, panels.data(), num_panels, k, 0, pairs, want.data(),
                              ldy, false);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double expected = 0.0, bound = 0.0;
            for (int64_t p = 0; p < k; ++p) {
              const double term = static_cast<double>(round_to_bf16(xf[i * k + p])) *
                                  bf16_to_fp32(rows[static_cast<size_t>(j * k + p)]);
              expected += term;
              bound += std::abs(term);
            }
            ASSERT_NEAR(want[i * ldy + j], expected, 1e-5 * bound + 1e-7);
          }
          for (int64_t j = n; j < ldy; ++j) ASSERT_EQ(want[i * ldy + j], -1.0f);
        }
        for (Isa isa : pair_isas()) {
          SCOPED_TRACE(isa_name(isa));
          std::vector<float> got(static_cast<size_t>(m * ldy), -1.0f);
          for (int64_t q0 = 0; q0 < pairs; q0 += 5 * (1 + q0 % 3)) {  // uneven depth blocks
            const int64_t q1 = std::min(pairs, q0 + 5 * (1 + q0 % 3));
            isa_kernels(isa).bf16_pair_gemm(x.data(), ldx, m, panels.data(), num_panels, k, q0, q1,
                                            got.data(), ldy, q0 > 0);
          }
          expect_same_bits(got, want);
        }
      }
    }
  }
}

// matmul_bf16_pairs: each row's outputs are the bits of that row run alone with one thread, for
// decode and prefill batch sizes (past the depth and row blocks), 1 and 2 threads; and they are
// the reference's.
TEST(Bf16Pairs, MatmulIsBatchInvariantAndTheReferencesBits) {
  const auto isas = pair_isas();
  if (isas.empty()) GTEST_SKIP() << "this CPU has no bf16 pair dots";
  ThreadPool single(1);
  ThreadPool pair(2);
  // k = 4200: two depth blocks of matmul's prefill (2048 pairs each and a remainder).
  for (int64_t k : {40, 576, 4200}) {
    const int64_t n = 48;
    const auto rows = random_bf16(n * k, 31);
    const auto panels = pairs_of(rows, n, k);
    const auto bias = random_floats(n, 32);
    const int64_t max_m = 530;
    const auto x = random_floats(max_m * k, 33);
    const auto xb = activation_pairs(x, max_m, k);
    std::vector<float> reference(static_cast<size_t>(max_m * n));
    bf16_pair_gemm_scalar(xb.data(), k / 2, max_m, panels.data(), n / kPanel16Rows, k, 0, k / 2,
                          reference.data(), n, false);
    for (int64_t i = 0; i < max_m; ++i)
      for (int64_t j = 0; j < n; ++j) reference[i * n + j] += bias[j];
    for (Isa isa : isas) {
      std::vector<float> alone(static_cast<size_t>(max_m * n));
      for (int64_t i = 0; i < max_m; ++i)
        matmul_bf16_pairs(panels.data(), x.data() + i * k, alone.data() + i * n, 1, n, k, single,
                          bias.data(), isa);
      expect_same_bits(alone, reference);
      for (int64_t m : {1, 2, 5, 8, 13, 530}) {
        for (ThreadPool* pool : {&single, &pair}) {
          SCOPED_TRACE(std::string(isa_name(isa)) + " k=" + std::to_string(k) + " m=" +
                       std::to_string(m) + " threads=" + std::to_string(pool->num_threads()));
          std::vector<float> y(static_cast<size_t>(m * n));
          matmul_bf16_pairs(panels.data(), x.data(), y.data(), m, n, k, *pool, bias.data(), isa);
          expect_same_bits(y, std::vector<float>(alone.begin(), alone.begin() + m * n));
        }
      }
    }
  }
}

}  // namespace
}  // namespace lm::kernels
