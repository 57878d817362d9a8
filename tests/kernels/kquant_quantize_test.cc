// Our K-quant quantizers against llama.cpp's: the committed rows, quantized by ggml_quantize_chunk
// (scripts/fixtures/make_kquant_quantize_references.py), must come out byte for byte the same;
// and what they write decodes to within the format's own step of the input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/kquant_blocks.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(LM_REPO_ROOT) / "tests/fixtures/quant_blocks/kquant_quantize";
constexpr int64_t kRows = 24;
constexpr int64_t kCols = 512;

std::vector<uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> input_rows() {
  const std::vector<uint8_t> bytes = read_bytes(kDir / "input.f32");
  std::vector<float> rows(bytes.size() / sizeof(float));
  std::memcpy(rows.data(), bytes.data(), rows.size() * sizeof(float));
  return rows;
}

struct Case {
  const char* name;
  RowFormat format;
  void (*quantize)(const float*, void*, int64_t, Isa);
};

constexpr Case kCases[] = {{"q4_k", RowFormat::kQ4_K, quantize_row_q4_k},
                           {"q5_k", RowFormat::kQ5_K, quantize_row_q5_k},
                           {"q6_k", RowFormat::kQ6_K, quantize_row_q6_k}};

TEST(KquantQuantize, BlocksAreLlamaCppsByteForByte) {
  const std::vector<float> rows = input_rows();
  ASSERT_EQ(static_cast<int64_t>(rows.size()), kRows * kCols);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const std::vector<uint8_t> expected = read_bytes(kDir / (std::string(c.name) + ".bin"));
    const int64_t row_bytes_ = row_bytes(c.format, kCols);
    ASSERT_EQ(static_cast<int64_t>(expected.size()), kRows * row_bytes_);
    for (Isa isa : testing::supported_isas()) {  // the scalar search and the AVX2 one
      SCOPED_TRACE(isa_name(isa));
      std::vector<uint8_t> ours(expected.size());
      for (int64_t r = 0; r < kRows; ++r) {
        c.quantize(rows.data() + r * kCols, ours.data() + r * row_bytes_, kCols, isa);
      }
      const int64_t block_bytes = row_format_info(c.format).block_bytes;
      for (int64_t b = 0; b < static_cast<int64_t>(expected.size()) / block_bytes; ++b) {
        EXPECT_EQ(0, std::memcmp(ours.data() + b * block_bytes, expected.data() + b * block_bytes,
                                 static_cast<size_t>(block_bytes)))
            << "row " << b / (kCols / kquant::kSuperBlock) << " super-block "
            << b % (kCols / kquant::kSuperBlock);
      }
    }
  }
}

// Beyond the fixture: many seeded rows of varied scale, every ISA's blocks equal the scalar
// search's (lanes are groups; any lane that drifted would show here).
TEST(KquantQuantize, EveryIsaGivesTheScalarBytes) {
  for (int seed = 0; seed < 64; ++seed) {
    std::vector<float> row = testing::random_floats(kCols, static_cast<uint32_t>(seed));
    const float scale = std::pow(10.0f, static_cast<float>(seed % 9 - 5));
    for (int64_t i = 0; i < kCols; ++i) {
      float& v = row[static_cast<size_t>(i)];
      v *= scale;
      if (seed % 4 == 1) v = std::fabs(v);                          // all positive
      if (seed % 8 == 3 && i < 64) v = 0.0f;                        // zero groups
      if (seed % 8 == 5 && i >= 256 && i < 288) v = -0.5f * scale;  // a flat group
    }
    for (const Case& c : kCases) {
      std::vector<uint8_t> scalar(static_cast<size_t>(row_bytes(c.format, kCols)));
      c.quantize(row.data(), scalar.data(), kCols, Isa::kScalar);
      for (Isa isa : testing::supported_isas()) {
        std::vector<uint8_t> ours(scalar.size());
        c.quantize(row.data(), ours.data(), kCols, isa);
        ASSERT_EQ(ours, scalar) << c.name << " " << isa_name(isa) << " seed " << seed;
      }
    }
  }
}

// Decoded, each value is within a step of its group's grid of the input; a Gaussian row's error
// is a small fraction of its spread (more bits, less error).
TEST(KquantQuantize, DecodedRowsFollowTheInput) {
  const std::vector<float> rows = input_rows();
  double previous = 1.0;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    std::vector<uint8_t> block(static_cast<size_t>(row_bytes(c.format, kCols)));
    std::vector<float> back(kCols);
    const float* row = rows.data() + 2 * kCols;  // "gaussian 1"
    c.quantize(row, block.data(), kCols, Isa::kScalar);
    dequantize_row(c.format, block.data(), back.data(), kCols);
    double err = 0, norm = 0;
    for (int64_t i = 0; i < kCols; ++i) {
      err += (back[i] - row[i]) * (back[i] - row[i]);
      norm += row[i] * row[i];
    }
    const double rel = std::sqrt(err / norm);
    EXPECT_LT(rel, previous);
    EXPECT_LT(rel, 0.12);
    previous = rel;
  }
}

}  // namespace
}  // namespace lm::kernels
