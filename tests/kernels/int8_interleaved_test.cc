// Interleaved weight rows (interleaved_rows.h) and their int8 GEMM (AVX2 and AVX-512 VNNI): the
// layout is a byte permutation that round-trips, every format matches the exact integer math of
// the dequantized weights and quantized activations, a (weight row, activation row) result is
// the same bits whatever the batch, the position in it, the tile shape and the thread count, and
// the AVX2 kernel gives the VNNI kernel's bits.
#include "kernels/cpu/int8_interleaved.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernel_test_util.h"
#include "kernels/cpu/interleaved_rows.h"
#include "kernels/cpu/matmul.h"

namespace lm::kernels {
namespace {

using testing::random_floats;
constexpr auto weight_rows = testing::quantized_weight_rows;
constexpr auto quantized_rows = testing::quantized_activation_rows;

constexpr RowFormat kFormats[] = {
    RowFormat::kQ8_0,   RowFormat::kQ4_0,   RowFormat::kQ4_1,   RowFormat::kQ5_0, RowFormat::kQ5_1,
    RowFormat::kQ4_K,   RowFormat::kQ5_K,   RowFormat::kQ6_K,   RowFormat::kQ2_K, RowFormat::kQ3_K,
    RowFormat::kIQ4_NL, RowFormat::kIQ4_XS, RowFormat::kQ4_Z128};

struct alignas(64) Line {
  uint8_t bytes[64];
};

std::vector<uint8_t> interleaved(RowFormat format, const std::vector<uint8_t>& rows, int64_t n,
                                 int64_t k) {
  std::vector<uint8_t> out(rows.size());
  interleave_rows(format, rows.data(), row_bytes(format, k), n, k, out.data());
  return out;
}

using GemmFn = void (*)(RowFormat, const void*, int64_t, const void*, int64_t, int64_t, float*,
                        int64_t);

// y[m, n] through one GEMM function (every level's reads the AVX2 preparation).
std::vector<float> gemm_with(GemmFn fn, RowFormat format, const uint8_t* w, int64_t n,
                             const BlockQ8Act* xq, int64_t m, int64_t k) {
  std::vector<Line> prepared(static_cast<size_t>(m * int8_interleaved_row_bytes(k) / 64));
  int8_interleaved_prepare_avx2(xq, k / 32, m, k, prepared.data());
  std::vector<float> y(static_cast<size_t>(m * n), -1.0f);
  fn(format, w, n, prepared.data(), m, k, y.data(), n);
  return y;
}

// y[m, n] through the ISA's kernel directly.
std::vector<float> gemm(Isa isa, RowFormat format, const uint8_t* w, int64_t n,
                        const BlockQ8Act* xq, int64_t m, int64_t k) {
  return gemm_with(isa_kernels(isa).int8_interleaved_gemm, format, w, n, xq, m, k);
}

TEST(InterleavedRows, TakesTheFormatsWithWholeGroupsOfEightRows) {
  EXPECT_TRUE(can_interleave(RowFormat::kQ4_0, 16, 64));
  EXPECT_TRUE(can_interleave(RowFormat::kQ4_K, 8, 256));
  EXPECT_FALSE(can_interleave(RowFormat::kQ4_0, 12, 64));  // n % 8 != 0
  EXPECT_FALSE(can_interleave(RowFormat::kQ4_K, 8, 96));   // k % 256 != 0
  EXPECT_TRUE(can_interleave(RowFormat::kQ6_K, 8, 256));
  EXPECT_TRUE(can_interleave(RowFormat::kQ5_0, 8, 32));
  EXPECT_TRUE(can_interleave(RowFormat::kQ5_K, 8, 256));
  EXPECT_FALSE(can_interleave(RowFormat::kF16, 8, 64));
  EXPECT_TRUE(can_interleave(RowFormat::kIQ4_NL, 8, 32));
  EXPECT_TRUE(can_interleave(RowFormat::kIQ4_XS, 8, 256));
  EXPECT_TRUE(can_interleave(RowFormat::kQ3_K, 16, 512));
  EXPECT_TRUE(can_interleave(RowFormat::kQ2_K, 8, 256));
  EXPECT_FALSE(can_interleave(RowFormat::kQ2_K, 8, 128));  // k % 256 != 0
  EXPECT_TRUE(can_interleave(RowFormat::kQ4_Z128, 8, 128));
  EXPECT_FALSE(can_interleave(RowFormat::kQ4_Z128, 8, 96));  // k % 128 != 0
}

TEST(InterleavedRows, LaysQ4Z128OutAsQ4_0WithAZeroPointAndTheNibblesOnA32ByteBoundary) {
  // Group block: d of rows 0-7, z of rows 0-7, the rows' unused bytes, then per sub-block of 32
  // two words of nibbles (Q4_0's).
  constexpr int64_t n = 8, k = 256, rb = 136;  // two blocks of 68 bytes a row
  const auto rows = weight_rows(RowFormat::kQ4_Z128, n, k, 19);
  const auto packed = interleaved(RowFormat::kQ4_Z128, rows, n, k);
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows.data() + r * rb;
    EXPECT_EQ(packed[2 * r + 1], row[1]);                         // d
    EXPECT_EQ(packed[16 + r], row[2]);                            // z
    EXPECT_EQ(packed[24 + r], 0);                                 // unused
    EXPECT_EQ(packed[32 + 64 * 5 + 8 * r + 3], row[4 + 40 + 3]);  // sub-block 2, word 1
    EXPECT_EQ(packed[544 + 32 + 8 * r], row[68 + 4]);             // block 1, word 0
  }
}

TEST(InterleavedRows, IsAPermutationOfTheRowsBytesThatRoundTrips) {
  for (RowFormat format : kFormats) {
    SCOPED_TRACE(row_format_info(format).name);
    constexpr int64_t n = 24, k = 512;
    const auto rows = weight_rows(format, n, k, 7);
    const auto packed = interleaved(format, rows, n, k);
    EXPECT_NE(packed, rows);
    auto sorted_rows = rows, sorted_packed = packed;
    std::sort(sorted_rows.begin(), sorted_rows.end());
    std::sort(sorted_packed.begin(), sorted_packed.end());
    EXPECT_EQ(sorted_packed, sorted_rows);
    const int64_t rb = row_bytes(format, k);
    std::vector<uint8_t> row(static_cast<size_t>(rb));
    for (int64_t j = 0; j < n; ++j) {
      deinterleave_row(format, packed.data(), j, k, row.data());
      ASSERT_TRUE(std::equal(row.begin(), row.end(), rows.begin() + j * rb)) << j;
    }
  }
}

TEST(InterleavedRows, PutsTheSameWordOfEightRowsInOneCacheLine) {
  // Q4_0 group block: 8 fp16 scales, then word 0 (bytes 0-7 of qs) of rows 0-7, then word 1.
  constexpr int64_t n = 8, k = 32;
  const auto rows = weight_rows(RowFormat::kQ4_0, n, k, 9);
  const auto packed = interleaved(RowFormat::kQ4_0, rows, n, k);
  for (int64_t r = 0; r < n; ++r) {
    EXPECT_EQ(packed[2 * r], rows[r * 18]);
    EXPECT_EQ(packed[16 + 8 * r + 3], rows[r * 18 + 2 + 3]);
    EXPECT_EQ(packed[80 + 8 * r + 5], rows[r * 18 + 2 + 8 + 5]);
  }
}

TEST(InterleavedRows, LaysQ6KOutInTheOrderItsKernelReads) {
  // Group block: d of rows 0-7, the scale pairs, then per half ql words 0-3, qh words 0-3, ql
  // words 4-7 (so that decode streams forwards).
  constexpr int64_t n = 8, k = 256, rb = 210;
  const auto rows = weight_rows(RowFormat::kQ6_K, n, k, 11);
  const auto packed = interleaved(RowFormat::kQ6_K, rows, n, k);
  const auto word = [&](int64_t at, int64_t r, int64_t size) { return packed[at + size * r]; };
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row = rows.data() + r * rb;
    EXPECT_EQ(word(0, r, 2), row[208]);                      // d
    EXPECT_EQ(word(16 + 16 * 3, r, 2), row[192 + 6]);        // scale pair 3
    EXPECT_EQ(word(144, r, 8), row[0]);                      // half 0: ql word 0
    EXPECT_EQ(word(144 + 256, r, 8), row[128]);              // qh word 0
    EXPECT_EQ(word(144 + 512 + 64, r, 8), row[40]);          // ql word 5
    EXPECT_EQ(word(144 + 768, r, 8), row[64]);               // half 1: ql word 8
    EXPECT_EQ(word(144 + 768 + 256 + 64, r, 8), row[168]);   // qh word 5
    EXPECT_EQ(word(144 + 768 + 512 + 192, r, 8), row[120]);  // ql word 15
  }
}
TEST(InterleavedRows, LaysTheLowBitFormatsOutInTheOrderTheirKernelsRead) {
  // Q3_K: d, the 3 words of packed scales, hmask words 0-3, qs words 0-7. Q2_K: d, dmin, each
  // group's scale/min pair, qs words 0-7. IQ4_XS: d, scales_h, scales_l, qs words 0-15.
  constexpr int64_t n = 8, k = 256;
  const auto q3 = weight_rows(RowFormat::kQ3_K, n, k, 13);
  const auto q3_packed = interleaved(RowFormat::kQ3_K, q3, n, k);
  const auto q2 = weight_rows(RowFormat::kQ2_K, n, k, 15);
  const auto q2_packed = interleaved(RowFormat::kQ2_K, q2, n, k);
  const auto xs = weight_rows(RowFormat::kIQ4_XS, n, k, 17);
  const auto xs_packed = interleaved(RowFormat::kIQ4_XS, xs, n, k);
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* row3 = q3.data() + r * 110;
    EXPECT_EQ(q3_packed[2 * r + 1], row3[109]);                     // d
    EXPECT_EQ(q3_packed[16 + 32 + 4 * r + 2], row3[102]);           // scales word 1
    EXPECT_EQ(q3_packed[112 + 64 * 3 + 8 * r], row3[24]);           // hmask word 3
    EXPECT_EQ(q3_packed[368 + 64 * 5 + 8 * r + 7], row3[32 + 47]);  // qs word 5
    const uint8_t* row2 = q2.data() + r * 84;
    EXPECT_EQ(q2_packed[16 + 2 * r], row2[82]);                 // dmin
    EXPECT_EQ(q2_packed[32 + 16 * 6 + 2 * r + 1], row2[13]);    // group 6's second scale byte
    EXPECT_EQ(q2_packed[160 + 64 * 7 + 8 * r], row2[16 + 56]);  // qs word 7
    const uint8_t* row_xs = xs.data() + r * 136;
    EXPECT_EQ(xs_packed[16 + 2 * r + 1], row_xs[3]);                // scales_h
    EXPECT_EQ(xs_packed[32 + 4 * r + 3], row_xs[7]);                // scales_l
    EXPECT_EQ(xs_packed[64 + 64 * 9 + 8 * r + 1], row_xs[8 + 73]);  // qs word 9
  }
}

// Each level with an interleaved GEMM (the AVX-512 level runs AVX2's; avx-vnni AVX2's on 256-bit
// vpdpbusd).
class Int8Interleaved : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU lacks " << isa_name(GetParam());
    ASSERT_TRUE(has_interleaved_matmul(GetParam()));
  }
  Isa isa() const { return GetParam(); }
  std::vector<float> gemm(RowFormat format, const uint8_t* w, int64_t n, const BlockQ8Act* xq,
                          int64_t m, int64_t k) const {
    return kernels::gemm(isa(), format, w, n, xq, m, k);
  }
};

INSTANTIATE_TEST_SUITE_P(Levels, Int8Interleaved,
                         ::testing::Values(Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512,
                                           Isa::kAvx512Vnni),
                         [](const ::testing::TestParamInfo<Isa>& level) {
                           std::string name = isa_name(level.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Int8InterleavedLevels, ScalarHasNone) { EXPECT_FALSE(has_interleaved_matmul(Isa::kScalar)); }

// AVX2's vpmaddubsw + vpmaddwd, avx-vnni's 256-bit vpdpbusd in each encoding this CPU runs (the
// table picks one; both are called here) and the VNNI level's 512-bit one: the same integers and
// float operations, so the same bits.
TEST(Int8InterleavedLevels, EveryLevelAndEncodingGivesTheSameBits) {
  struct Kernel {
    const char* name;
    GemmFn fn;
  };
  std::vector<Kernel> kernels;
  const CpuId id = read_cpu_id();
  if (isa_supported(Isa::kAvx2)) kernels.push_back({"avx2", int8_interleaved_gemm_avx2});
  if (isa_supported(Isa::kAvx2) && has_avx_vnni_vex(id))
    kernels.push_back({"avx-vnni (VEX)", int8_interleaved_gemm_avx_vnni});
  if (isa_supported(Isa::kAvx512Vnni)) {
    kernels.push_back({"avx-vnni (EVEX)", int8_interleaved_gemm_avx_vnni_evex});
    kernels.push_back({"avx512-vnni", int8_interleaved_gemm_vnni});
  }
  if (kernels.size() < 2) GTEST_SKIP() << "this CPU runs one interleaved GEMM";
  for (RowFormat format : kFormats) {
    for (int64_t m : {1, 3, 5, 6, 9}) {
      constexpr int64_t n = 16, k = 512;
      SCOPED_TRACE(std::string(row_format_info(format).name) + " m=" + std::to_string(m));
      const auto w = interleaved(format, weight_rows(format, n, k, 81), n, k);
      const auto xq = quantized_rows(m, k, 83);
      const auto first = gemm_with(kernels[0].fn, format, w.data(), n, xq.data(), m, k);
      for (size_t l = 1; l < kernels.size(); ++l) {
        EXPECT_EQ(gemm_with(kernels[l].fn, format, w.data(), n, xq.data(), m, k), first)
            << kernels[l].name << " vs " << kernels[0].name;
      }
    }
  }
}

TEST_P(Int8Interleaved, EveryFormatMatchesTheExactIntegerMath) {
  for (RowFormat format : kFormats) {
    for (int64_t k : {256, 768}) {
      for (int64_t m : {1, 2, 3, 5, 6, 7, 8, 13}) {
        constexpr int64_t n = 16;
        SCOPED_TRACE(std::string(row_format_info(format).name) + " k=" + std::to_string(k) +
                     " m=" + std::to_string(m));
        const auto w = weight_rows(format, n, k, 41);
        const auto xq = quantized_rows(m, k, 43);
        const auto y = gemm(format, interleaved(format, w, n, k).data(), n, xq.data(), m, k);
        testing::expect_exact_int8_math(format, w, n, xq, m, k, y);
      }
    }
  }
}

// Rows of the largest quants each format holds (Q8_0's -128, the IQ4 levels' -127, every other
// field's bits all set) with their fp16 scales 1.0, against activations of +-127: the int16 sums
// AVX2 builds before widening are at their largest here (the bounds int8_interleaved_avx2.cc
// states), where a saturating step would show.
std::vector<uint8_t> extreme_rows(RowFormat format, int64_t n, int64_t k) {
  // Each format's fill byte and the byte offsets of the fp16 fields in its blocks (GGML's layouts;
  // Q4_Z128's d first).
  struct Layout {
    RowFormat format;
    uint8_t fill;
    std::vector<int64_t> fp16_offsets;
  };
  const Layout layouts[] = {
      {RowFormat::kQ8_0, 0x80, {0}},      {RowFormat::kQ4_0, 0xff, {0}},
      {RowFormat::kQ4_1, 0xff, {0, 2}},   {RowFormat::kQ5_0, 0xff, {0}},
      {RowFormat::kQ5_1, 0xff, {0, 2}},   {RowFormat::kQ4_K, 0xff, {0, 2}},
      {RowFormat::kQ5_K, 0xff, {0, 2}},   {RowFormat::kQ6_K, 0xff, {208}},
      {RowFormat::kQ2_K, 0xff, {80, 82}}, {RowFormat::kQ3_K, 0xff, {108}},
      {RowFormat::kIQ4_NL, 0x00, {0}},    {RowFormat::kIQ4_XS, 0x00, {0}},
      {RowFormat::kQ4_Z128, 0xff, {0}},
  };
  const auto block_bytes = static_cast<size_t>(row_format_info(format).block_bytes);
  for (const Layout& layout : layouts) {
    if (layout.format != format) continue;
    std::vector<uint8_t> rows(static_cast<size_t>(n * row_bytes(format, k)), layout.fill);
    for (size_t b = 0; b < rows.size(); b += block_bytes) {
      for (int64_t at : layout.fp16_offsets) {
        rows[b + at] = 0x00;  // fp16 1.0, little-endian
        rows[b + at + 1] = 0x3c;
      }
      if (format == RowFormat::kIQ4_XS)
        std::fill_n(rows.begin() + static_cast<int64_t>(b) + 2, 6, 0xff);  // scales: 63 - 32
    }
    return rows;
  }
  ADD_FAILURE() << "no extreme layout for " << row_format_info(format).name;
  return {};
}

TEST_P(Int8Interleaved, LargestQuantsAgainstLargestActivationsStayExact) {
  constexpr int64_t n = 16, k = 256, m = 4;
  // Rows: all +127, all -127, alternating signs, and -127 / +127 in halves of each block.
  std::vector<float> x(static_cast<size_t>(m * k));
  for (int64_t t = 0; t < k; ++t) {
    x[t] = 1.0f;
    x[k + t] = -1.0f;
    x[2 * k + t] = t % 2 ? -1.0f : 1.0f;
    x[3 * k + t] = t % 32 < 16 ? -1.0f : 1.0f;
  }
  std::vector<BlockQ8Act> xq(static_cast<size_t>(m * k / 32));
  for (int64_t i = 0; i < m; ++i)
    quantize_row_q8_act(x.data() + i * k, xq.data() + i * k / 32, k, Isa::kScalar);
  for (RowFormat format : kFormats) {
    SCOPED_TRACE(row_format_info(format).name);
    const auto w = extreme_rows(format, n, k);
    const auto y = gemm(format, interleaved(format, w, n, k).data(), n, xq.data(), m, k);
    testing::expect_exact_int8_math(format, w, n, xq, m, k, y);
  }
}

TEST_P(Int8Interleaved, ResultsDoNotDependOnTileShapeBatchOrPosition) {
  constexpr int64_t k = 512, n = 24, m = 19;
  for (RowFormat format : kFormats) {
    SCOPED_TRACE(row_format_info(format).name);
    const auto w = interleaved(format, weight_rows(format, n, k, 51), n, k);
    const auto xq = quantized_rows(m, k, 53);
    const auto whole = gemm(format, w.data(), n, xq.data(), m, k);
    // Each activation row alone, each group alone, and odd sub-batches at odd offsets.
    for (int64_t i = 0; i < m; ++i) {
      const auto alone = gemm(format, w.data(), n, xq.data() + i * k / 32, 1, k);
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(alone[j], whole[i * n + j]) << i << "," << j;
    }
    const int64_t group_bytes = 8 * row_bytes(format, k);
    for (int64_t g = 0; g < n / 8; ++g) {
      const auto alone = gemm(format, w.data() + g * group_bytes, 8, xq.data(), m, k);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t r = 0; r < 8; ++r) ASSERT_EQ(alone[i * 8 + r], whole[i * n + 8 * g + r]);
      }
    }
    // Every tile shape: a verify step's 2-5 rows and each remainder of the widest tile.
    for (int64_t size = 2; size <= 11; ++size) {
      const auto part = gemm(format, w.data(), n, xq.data() + 3 * k / 32, size, k);
      for (int64_t i = 0; i < size; ++i) {
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(part[i * n + j], whole[(i + 3) * n + j]) << size << ": " << i << "," << j;
      }
    }
  }
}

TEST_P(Int8Interleaved, MatmulIsBatchInvariantOnAnyThreadCountAndAddsTheBias) {
  ThreadPool one(1);
  ThreadPool two(2);
  constexpr int64_t k = 768, n = 40, m = 13;
  const auto bias = random_floats(n, 5);
  for (RowFormat format : kFormats) {
    SCOPED_TRACE(row_format_info(format).name);
    const auto rows = weight_rows(format, n, k, 61);
    const auto w = interleaved(format, rows, n, k);
    const auto x = random_floats(m * k, 63);
    std::vector<float> batched(static_cast<size_t>(m * n));
    matmul_interleaved(format, w.data(), x.data(), batched.data(), m, n, k, two, bias.data(),
                       isa());
    // The row layout on the int8 path computes the same products (other sums, same values).
    std::vector<float> reference(static_cast<size_t>(m * n));
    matmul(format, rows.data(), row_bytes(format, k), x.data(), reference.data(), m, n, k, one,
           bias.data(), Isa::kScalar, /*quantize_activations=*/true);
    for (int64_t i = 0; i < m; ++i) {
      std::vector<float> single(static_cast<size_t>(n));
      matmul_interleaved(format, w.data(), x.data() + i * k, single.data(), 1, n, k,
                         i % 2 ? one : two, bias.data(), isa());
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(single[j], batched[i * n + j]) << i << "," << j;
        ASSERT_NEAR(batched[i * n + j], reference[i * n + j],
                    1e-4f * (1.0f + std::abs(reference[i * n + j])));
      }
    }
  }
}

// More activation rows than one block of prepared rows that stays in cache (the GEMM's m
// blocking): still the same bits as each row alone.
TEST_P(Int8Interleaved, ManyRowsMatchEachRowAlone) {
  ThreadPool two(2);
  constexpr int64_t k = 256, n = 16, m = 600;
  const auto w = interleaved(RowFormat::kQ4_0, weight_rows(RowFormat::kQ4_0, n, k, 71), n, k);
  const auto x = random_floats(m * k, 73);
  std::vector<float> batched(static_cast<size_t>(m * n));
  matmul_interleaved(RowFormat::kQ4_0, w.data(), x.data(), batched.data(), m, n, k, two, nullptr,
                     isa());
  for (int64_t i = 0; i < m; i += 37) {
    std::vector<float> single(static_cast<size_t>(n));
    matmul_interleaved(RowFormat::kQ4_0, w.data(), x.data() + i * k, single.data(), 1, n, k, two,
                       nullptr, isa());
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(single[j], batched[i * n + j]) << i << "," << j;
  }
}

}  // namespace
}  // namespace lm::kernels
