// LLM.int8's quantizers (TGI's --quantize bitsandbytes) against bitsandbytes' own
// (scripts/fixtures/make_llm_int8_references.py): weight rows give its int8 values and absmax
// (fp16 rounding of the input, ties rounded half to even) as Q8_0 blocks of scale 1; activation
// rows keep their outliers (>= 6 after the fp16 cast) and quantize the rest per token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernels/cpu/interleaved_rows.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/llm_int8.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

using Json = nlohmann::json;

Json fixture() {
  std::ifstream in(std::string(LM_REPO_ROOT) + "/tests/fixtures/quant_blocks/llm_int8.json");
  return Json::parse(in);
}

TEST(LlmInt8, WeightRowsGetBitsandbytesValuesAndAbsmax) {
  const Json f = fixture();
  const int64_t rows = f["rows"], cols = f["cols"];
  const auto weight = f["weight"].get<std::vector<float>>();
  const auto q = f["q"].get<std::vector<int>>();
  const auto scb = f["scb"].get<std::vector<float>>();
  const int64_t bytes = row_bytes(RowFormat::kQ8_0, cols);
  std::vector<uint8_t> row(static_cast<size_t>(bytes));
  int64_t ties = 0;
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(quantize_row_llm_int8(weight.data() + r * cols, row.data(), cols),
              scb[static_cast<size_t>(r)])
        << "row " << r;
    for (int64_t b = 0; b < cols / kQuantBlockSize; ++b) {
      const uint8_t* block = row.data() + b * quant::kQ8_0Bytes;
      ASSERT_EQ(quant::load_f16(block), 1.0f) << "row " << r << " block " << b;
      for (int64_t i = 0; i < kQuantBlockSize; ++i) {
        const int64_t c = b * kQuantBlockSize + i;
        const float w = weight[static_cast<size_t>(r * cols + c)];
        ties += scb[static_cast<size_t>(r)] == 127.0f && w != std::floor(w);
        ASSERT_EQ(static_cast<int8_t>(block[2 + i]), q[static_cast<size_t>(r * cols + c)])
            << "row " << r << " col " << c << " w " << w;
      }
    }
  }
  EXPECT_GT(ties, 100);  // the fixture's row of halves: half to even, not away from zero
}

TEST(LlmInt8, AnAllZeroWeightRowHasZeroValuesAndAbsmax) {
  std::vector<float> zeros(64, 0.0f);
  std::vector<uint8_t> row(static_cast<size_t>(row_bytes(RowFormat::kQ8_0, 64)), 0xff);
  EXPECT_EQ(quantize_row_llm_int8(zeros.data(), row.data(), 64), 0.0f);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < kQuantBlockSize; ++i)
      EXPECT_EQ(row[static_cast<size_t>(b * quant::kQ8_0Bytes + 2 + i)], 0);
}

// The value a block holds at i: q * d.
float value(const BlockQ8Act* row, int64_t i) {
  return static_cast<float>(row[i / kQuantBlockSize].qs[i % kQuantBlockSize]) *
         row[i / kQuantBlockSize].d;
}

TEST(LlmInt8, ActivationsListOutliersAndQuantizeTheRestPerToken) {
  const int64_t k = 32;
  // Outliers after the fp16 cast: 6 (the threshold itself), 5.999 (6 in fp16), -7; 5.99 is not
  // one (5.98828125 in fp16), so it sets the row's absmax.
  std::vector<float> x = {6.0f, 5.999f, -7.0f, 5.99f, 1.0f, -2.5f, 0.0f, 0.1f};
  x.resize(static_cast<size_t>(k), 0.5f);
  // A second row of small values, no outlier: its own absmax.
  for (int64_t i = 0; i < k; ++i) x.push_back(0.01f * static_cast<float>(i));
  std::vector<BlockQ8Act> xq(2);
  LlmInt8Outliers outliers;
  quantize_rows_llm_int8(x.data(), 2, k, xq.data(), outliers);
  EXPECT_EQ(outliers.begin, (std::vector<int64_t>{0, 3, 3}));
  EXPECT_EQ(outliers.column, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(outliers.value, (std::vector<float>{6.0f, 5.999f, -7.0f}));  // fp32, as given
  const float absmax = fp16_to_fp32(fp32_to_fp16(5.99f));
  ASSERT_EQ(absmax, 5.98828125f);
  const float factor = (1.0f / absmax) * 127.0f;  // torch's 127.0 / absmax
  EXPECT_EQ(xq[0].d, absmax * (6.200124e-05f * 127.0f));
  int32_t sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    const float a = i < 3 ? 0.0f : fp16_to_fp32(fp32_to_fp16(x[static_cast<size_t>(i)]));
    EXPECT_EQ(xq[0].qs[i], static_cast<int8_t>(std::nearbyint(a * factor))) << i;
    sum += xq[0].qs[i];
  }
  EXPECT_EQ(xq[0].qs[3], 127);  // the absmax: 127 levels
  EXPECT_EQ(xq[0].s, xq[0].d * static_cast<float>(sum));
  EXPECT_EQ(xq[1].qs[k - 1], 127);
  EXPECT_NEAR(value(xq.data() + 1, 7), 0.07f, 0.31f / 127);
}

TEST(LlmInt8, EveryIsaAndThreadSplitGiveTheScalarBitsAndOutliers) {
  // 37 tokens of 96 values, a few outliers each (some rows none), NaN and inf among them.
  const int64_t m = 37, k = 96;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = normal(rng);
  x[5] = std::nanf("");
  x[k + 3] = std::numeric_limits<float>::infinity();
  x[2 * k + 9] = 70000.0f;  // inf in fp16
  // fp16's edges: the largest finite (65504), the tie that rounds to inf (65520), a subnormal,
  // -0, the threshold itself and 5.999 (6 in fp16).
  const float edges[] = {65504.0f, 65520.0f, -65519.0f, 3e-6f, -0.0f, 6.0f, 5.999f, -5.998f};
  for (size_t i = 0; i < std::size(edges); ++i) x[3 * k + 5 * i] = edges[i];
  // A row of exact ties: absmax 127 / 32 makes the factor 32.0, so (j + 0.5) / 32 (exact in
  // fp16) lands on j + 0.5, which rounds to even (0, 2, 2, 4, ...).
  for (int64_t i = 0; i < k; ++i)
    x[static_cast<size_t>(4 * k + i)] = (static_cast<float>(i % 40) + 0.5f) / 32.0f;
  x[4 * k] = 127.0f / 32.0f;
  std::vector<BlockQ8Act> serial(static_cast<size_t>(m * k / 32)), threaded(serial.size());
  LlmInt8Outliers serial_outliers, threaded_outliers;
  quantize_rows_llm_int8(x.data(), m, k, serial.data(), serial_outliers, nullptr, Isa::kScalar);
  ThreadPool pool(3);
  std::vector<std::pair<ThreadPool*, Isa>> runs = {{&pool, Isa::kScalar}};
  if (isa_supported(Isa::kAvx2)) {  // eight at a time (llm_int8_avx2.h), alone and threaded
    runs.push_back({nullptr, Isa::kAvx2});
    runs.push_back({&pool, Isa::kAvx2});
    runs.push_back({&pool, Isa::kAvx2});  // again: the per-row lists reused
  }
  for (const auto& [threads, isa] : runs) {
    SCOPED_TRACE(::testing::Message()
                 << "isa " << static_cast<int>(isa) << " pool " << (threads != nullptr));
    quantize_rows_llm_int8(x.data(), m, k, threaded.data(), threaded_outliers, threads, isa);
    EXPECT_EQ(threaded_outliers.begin, serial_outliers.begin);
    EXPECT_EQ(threaded_outliers.column, serial_outliers.column);
    EXPECT_EQ(std::memcmp(threaded_outliers.value.data(), serial_outliers.value.data(),
                          serial_outliers.value.size() * sizeof(float)),
              0);
    EXPECT_EQ(std::memcmp(threaded.data(), serial.data(), serial.size() * sizeof(BlockQ8Act)), 0);
  }
  EXPECT_GT(serial_outliers.column.size(), 20u);  // normal(0, 2.5): ~1.6% past 6
  EXPECT_EQ(serial[4 * k / 32].qs[1], 2);         // 1.5 -> 2
  EXPECT_EQ(serial[4 * k / 32].qs[2], 2);         // 2.5 -> 2
  // And each quantized value is nearbyint(a * factor) clamped, half to even.
  int64_t checked = 0;
  for (int64_t r = 0; r < m; ++r) {
    float absmax = 0.0f;
    for (int64_t i = 0; i < k; ++i) {
      const float a = fp16_to_fp32(fp32_to_fp16(x[static_cast<size_t>(r * k + i)]));
      if (!(std::fabs(a) >= 6.0f)) absmax = std::max(absmax, std::fabs(a));
    }
    const float factor = absmax == 0.0f ? 0.0f : (1.0f / absmax) * 127.0f;
    for (int64_t i = 0; i < k; ++i) {
      const float a = fp16_to_fp32(fp32_to_fp16(x[static_cast<size_t>(r * k + i)]));
      if (std::fabs(a) >= 6.0f || std::isnan(a)) continue;
      const float q = std::clamp(std::nearbyint(a * factor), -127.0f, 127.0f);
      EXPECT_EQ(serial[static_cast<size_t>(r * k / 32 + i / 32)].qs[i % 32],
                static_cast<int8_t>(q));
      ++checked;
    }
  }
  EXPECT_GT(checked, m * k * 9 / 10);
}

TEST(LlmInt8, ValuesPastFp16OrNanStayInt8) {
  std::vector<float> w(32, 1.0f);
  w[3] = 1e6f;  // inf in fp16: absmax inf, every factor 0
  w[4] = std::nanf("");
  std::vector<uint8_t> row(static_cast<size_t>(row_bytes(RowFormat::kQ8_0, 32)));
  EXPECT_TRUE(std::isinf(quantize_row_llm_int8(w.data(), row.data(), 32)));
  for (int64_t i = 0; i < 32; ++i)
    EXPECT_EQ(static_cast<int8_t>(row[static_cast<size_t>(2 + i)]), 0);
  std::vector<float> x(32, 1.0f);
  x[7] = std::nanf("");
  std::vector<BlockQ8Act> xq(1);
  LlmInt8Outliers outliers;
  quantize_rows_llm_int8(x.data(), 1, 32, xq.data(), outliers);
  EXPECT_EQ(xq[0].qs[7], 0);
  EXPECT_EQ(xq[0].qs[0], 127);
}

TEST(LlmInt8, ARowOfOnlyOutliersHasNoIntegerPart) {
  std::vector<float> x(32, -9.0f);
  x[5] = 8.0f;
  std::vector<BlockQ8Act> xq(1);
  LlmInt8Outliers outliers;
  quantize_rows_llm_int8(x.data(), 1, 32, xq.data(), outliers);
  EXPECT_EQ(outliers.value, x);
  EXPECT_EQ(xq[0].d, 0.0f);
  for (int8_t q : xq[0].qs) EXPECT_EQ(q, 0);
}

TEST(LlmInt8, OutliersMultiplyTheirWeightColumns) {
  const int64_t n = 16, k = 64;
  std::vector<float> w(static_cast<size_t>(n * k));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 241) - 120);
  for (int64_t j = 0; j < n; ++j) w[static_cast<size_t>(j * k + 10)] = 127.0f;
  const int64_t bytes = row_bytes(RowFormat::kQ8_0, k);
  std::vector<uint8_t> rows(static_cast<size_t>(n * bytes)), interleaved(rows.size());
  for (int64_t j = 0; j < n; ++j)  // absmax 127: q = w
    ASSERT_EQ(quantize_row_llm_int8(w.data() + j * k, rows.data() + j * bytes, k), 127.0f);
  interleave_rows(RowFormat::kQ8_0, rows.data(), bytes, n, k, interleaved.data());
  LlmInt8Outliers outliers{{0, 2, 2, 3}, {5, 40, 63}, {7.0f, -6.5f, 10.0f}};
  for (const bool in_groups : {false, true}) {  // the weights in rows, then interleaved
    SCOPED_TRACE(in_groups ? "interleaved" : "rows");
    std::vector<float> y(static_cast<size_t>(3 * n), 1.0f);
    add_llm_int8_outliers(outliers, in_groups ? interleaved.data() : rows.data(), in_groups, k,
                          y.data(), 3, n, 1, n);
    for (int64_t j = 0; j < n; ++j) {
      const auto at = [&](int64_t c) { return w[static_cast<size_t>(j * k + c)]; };
      const float skipped = 1.0f;  // output 0 is outside [1, n)
      EXPECT_EQ(y[static_cast<size_t>(j)], j == 0 ? skipped : 1.0f + 7.0f * at(5) - 6.5f * at(40));
      EXPECT_EQ(y[static_cast<size_t>(n + j)], 1.0f);  // row 1: no outliers
      EXPECT_EQ(y[static_cast<size_t>(2 * n + j)], j == 0 ? skipped : 1.0f + 10.0f * at(63));
    }
  }
}

}  // namespace
}  // namespace lm::kernels
