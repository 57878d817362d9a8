// Matmul in every format and ISA against a double-precision product of the scalar-dequantized
// weights, over decode (m = 1) and prefill shapes, padded rows, bias and 1 or 2 threads.
#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "base/fp16.h"
#include "kernel_test_util.h"

namespace lm::kernels {
namespace {

using testing::random_floats;
using testing::supported_isas;

constexpr RowFormat kAllFormats[] = {RowFormat::kF32,  RowFormat::kF16,  RowFormat::kBF16,
                                     RowFormat::kQ8_0, RowFormat::kQ4_0, RowFormat::kQ4_1,
                                     RowFormat::kQ5_0, RowFormat::kQ5_1};

// n rows of k weights in `format`, each padded by `pad` bytes.
struct PackedWeights {
  std::vector<uint8_t> bytes;
  int64_t row_bytes = 0;
  std::vector<float> dequantized;  // [n, k], the values the kernel should see
};

PackedWeights pack(RowFormat format, int64_t n, int64_t k, int64_t pad, uint32_t seed) {
  const auto w = random_floats(n * k, seed);
  PackedWeights p;
  p.row_bytes = row_bytes(format, k) + pad;
  p.bytes.assign(static_cast<size_t>(n * p.row_bytes), 0xab);
  p.dequantized.resize(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j) {
    uint8_t* row = p.bytes.data() + j * p.row_bytes;
    const float* src = w.data() + j * k;
    switch (format) {
      case RowFormat::kF32:
        std::memcpy(row, src, static_cast<size_t>(k) * 4);
        break;
      case RowFormat::kF16:
      case RowFormat::kBF16:
        for (int64_t i = 0; i < k; ++i) {
          const uint16_t h =
              format == RowFormat::kF16 ? fp32_to_fp16(src[i]) : fp32_to_bf16(src[i]);
          std::memcpy(row + 2 * i, &h, 2);
        }
        break;
      case RowFormat::kQ8_0:
        quantize_row_q8_0(src, row, k);
        break;
      case RowFormat::kQ4_0:
        quantize_row_q4_0(src, row, k);
        break;
      case RowFormat::kQ4_1:
        quantize_row_q4_1(src, row, k);
        break;
      case RowFormat::kQ5_0:
        quantize_row_q5_0(src, row, k);
        break;
      case RowFormat::kQ5_1:
        quantize_row_q5_1(src, row, k);
        break;
      case RowFormat::kNF4:
        quantize_row_nf4(src, row, k);
        break;
      case RowFormat::kFP4:
        quantize_row_fp4(src, row, k);
        break;
      case RowFormat::kQ4_Z128:
        quantize_row_q4_z128(src, row, k);
        break;
      case RowFormat::kQ4_K:
      case RowFormat::kQ5_K:
      case RowFormat::kQ6_K:
      case RowFormat::kQ2_K:
      case RowFormat::kQ3_K:
      case RowFormat::kIQ4_NL:
      case RowFormat::kIQ4_XS:
        ADD_FAILURE() << "K-quants and low-bit formats are tested in kquant_test.cc and "
                         "lowbit_quant_test.cc";
        break;
    }
    dequantize_row(format, row, p.dequantized.data() + j * k, k, Isa::kScalar);
  }
  return p;
}

void check_matmul(RowFormat format, Isa isa, ThreadPool& pool, int64_t m, int64_t n, int64_t k,
                  int64_t pad, bool with_bias) {
  SCOPED_TRACE(std::string(row_format_info(format).name) + " " + isa_name(isa) +
               " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
               " pad=" + std::to_string(pad) + " bias=" + std::to_string(with_bias) +
               " threads=" + std::to_string(pool.num_threads()));
  const PackedWeights w = pack(format, n, k, pad, 100 + static_cast<uint32_t>(n));
  const auto x = random_floats(m * k, 200 + static_cast<uint32_t>(m));
  const auto bias = random_floats(n, 300);
  std::vector<float> y(static_cast<size_t>(m * n), -77.0f);
  matmul(format, w.bytes.data(), w.row_bytes, x.data(), y.data(), m, n, k, pool,
         with_bias ? bias.data() : nullptr, isa);
  int failures = 0;
  for (int64_t i = 0; i < m && failures < 5; ++i) {
    for (int64_t j = 0; j < n && failures < 5; ++j) {
      const float* xr = x.data() + i * k;
      const float* wr = w.dequantized.data() + j * k;
      const double expected = testing::dot_double(xr, wr, k) + (with_bias ? bias[j] : 0.0);
      const double bound = 2e-5 * testing::abs_dot_double(xr, wr, k) + 1e-6;
      const float got = y[i * n + j];
      if (!(std::fabs(got - expected) <= bound)) {
        ADD_FAILURE() << "y[" << i << "," << j << "] = " << got << ", expected " << expected;
        ++failures;
      }
    }
  }
}

TEST(Matmul, AllFormatsAndIsasMatchReference) {
  ThreadPool pool(2);
  for (Isa isa : supported_isas()) {
    for (RowFormat format : kAllFormats) {
      for (int64_t k : {32, 64, 96, 4096 + 32}) {
        for (int64_t m : {1, 3, 17}) {
          for (int64_t n : {1, 7, 33}) check_matmul(format, isa, pool, m, n, k, 0, m != 3);
        }
      }
    }
  }
}

TEST(Matmul, OddShapesPaddedRowsAndOneThread) {
  ThreadPool single(1);
  ThreadPool pool(2);
  for (Isa isa : supported_isas()) {
    for (RowFormat format : {RowFormat::kF32, RowFormat::kF16, RowFormat::kBF16}) {
      check_matmul(format, isa, pool, 5, 9, 13, 0, true);  // k not a multiple of 8
      check_matmul(format, isa, pool, 2, 3, 1, 8, false);
    }
    for (RowFormat format : kAllFormats) {
      check_matmul(format, isa, pool, 17, 65, 576, 4, true);  // padded rows: stride > k
      check_matmul(format, isa, pool, 17, 40, 512, 0, true);  // X rows read from a padded copy
      check_matmul(format, isa, single, 64, 19, 96, 0, false);
      check_matmul(format, isa, single, 1, 19, 96, 0, true);
    }
  }
}

// Q4_Z128 (blocks of 128) with fp32 activations at every level (its int8 paths are
// int8_interleaved_test.cc's and q4_z128_test.cc's).
TEST(Matmul, Q4Z128MatchesReference) {
  ThreadPool pool(2);
  for (Isa isa : supported_isas()) {
    for (int64_t k : {128, 4096 + 128}) {
      for (int64_t m : {1, 3, 17}) {
        for (int64_t n : {1, 7, 33}) check_matmul(RowFormat::kQ4_Z128, isa, pool, m, n, k, 0, true);
      }
    }
    check_matmul(RowFormat::kQ4_Z128, isa, pool, 5, 9, 640, 4, false);  // padded rows
  }
}

TEST(Matmul, EmptyShapesAreNoOps) {
  ThreadPool pool(2);
  std::vector<float> y(4, 5.0f);
  const float x[32] = {};
  const float w[32] = {};
  matmul(RowFormat::kF32, w, 128, x, y.data(), 0, 4, 32, pool);
  matmul(RowFormat::kF32, w, 128, x, y.data(), 1, 0, 32, pool);
  for (float v : y) EXPECT_EQ(v, 5.0f);
  // With no X rows (or no W rows) neither matrix is read, on any path and at any ISA.
  for (Isa isa : supported_isas()) {
    for (bool quantize : {false, true}) {
      matmul(RowFormat::kQ8_0, nullptr, 34, nullptr, y.data(), 0, 4, 32, pool, nullptr, isa,
             quantize);
      matmul(RowFormat::kF32, nullptr, 128, nullptr, y.data(), 0, 4, 32, pool, nullptr, isa,
             quantize);
      matmul(RowFormat::kF32, nullptr, 128, x, y.data(), 1, 0, 32, pool, nullptr, isa, quantize);
    }
  }
  for (float v : y) EXPECT_EQ(v, 5.0f);
}

}  // namespace
}  // namespace lm::kernels
