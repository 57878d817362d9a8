// Embedding gather, RMSNorm, RoPE, SiLU*mul, residual add and the K/V slot store against their CPU
// twins on seeded random data.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cstring>

#include "base/fp16.h"
#include "cuda_test_util.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/row_format.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/store_kv.h"

namespace lm::kernels::cuda {
namespace {

using testing::CudaKernelTest;
using testing::DeviceBuffer;
using testing::expect_near_all;
using testing::random_floats;

using ElementwiseTest = CudaKernelTest;

// Bytes of a table of `rows` rows of `hidden` values stored in `format`.
std::vector<uint8_t> make_table(RowFormat format, const std::vector<float>& values, int64_t rows,
                                int64_t hidden) {
  std::vector<uint8_t> table(static_cast<size_t>(rows * row_bytes(format, hidden)));
  for (size_t i = 0; i < values.size(); ++i) {
    if (format == RowFormat::kF32) {
      std::memcpy(table.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t h =
          format == RowFormat::kF16 ? fp32_to_fp16(values[i]) : fp32_to_bf16(values[i]);
      std::memcpy(table.data() + 2 * i, &h, 2);
    }
  }
  return table;
}

TEST_F(ElementwiseTest, EmbeddingGatherMatchesDequantizeRow) {
  const int64_t vocab = 37, hidden = 200, num_tokens = 9;
  const std::vector<int32_t> ids = {0, 36, 5, 5, 17, 1, 30, 2, 36};
  for (RowFormat format : {RowFormat::kF32, RowFormat::kF16, RowFormat::kBF16}) {
    SCOPED_TRACE(row_format_info(format).name);
    const auto table = make_table(format, random_floats(vocab * hidden, 1, -3, 3), vocab, hidden);
    const int64_t rb = row_bytes(format, hidden);
    std::vector<float> expected(num_tokens * hidden);
    for (int64_t t = 0; t < num_tokens; ++t)
      kernels::dequantize_row(format, table.data() + ids[t] * rb, expected.data() + t * hidden,
                              hidden, Isa::kScalar);
    DeviceBuffer<uint8_t> d_table(table);
    DeviceBuffer<int32_t> d_ids(ids);
    DeviceBuffer<float> d_out(num_tokens * hidden);
    embedding_gather(format, d_table.get(), rb, d_ids.get(), d_out.get(), num_tokens, hidden,
                     nullptr);
    // A gather and an exact widening conversion: bit-identical.
    EXPECT_EQ(d_out.download(), expected);

    DeviceBuffer<__nv_bfloat16> d_bf16(num_tokens * hidden);
    embedding_gather_bf16(format, d_table.get(), rb, d_ids.get(), d_bf16.get(), num_tokens, hidden,
                          nullptr);
    const auto got = d_bf16.download();
    for (size_t i = 0; i < expected.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, &got[i], 2);
      // Round-to-nearest-even on both sides: identical bits.
      ASSERT_EQ(bits, fp32_to_bf16(expected[i])) << i;
    }
  }
}

TEST_F(ElementwiseTest, RmsNormMatchesCpu) {
  for (const auto& [rows, n] :
       {std::pair<int64_t, int64_t>{1, 64}, {7, 4096}, {3, 5120}, {5, 999}}) {
    const auto x = random_floats(rows * n, 2 + n, -4, 4);
    const auto w = random_floats(n, 3, 0.5f, 1.5f);
    std::vector<float> expected(x.size());
    kernels::rms_norm(x.data(), w.data(), expected.data(), rows, n, 1e-5f, Isa::kScalar);
    DeviceBuffer<float> d_x(x), d_w(w);
    cuda::rms_norm(d_x.get(), d_w.get(), d_x.get(), rows, n, 1e-5f, nullptr);  // in place
    // Only the sum of squares is ordered differently (tree vs sequential): a few ulp of the
    // scale, so 1e-5 relative covers n up to ~10k with margin.
    expect_near_all(d_x.download(), expected, 1e-6f, 1e-5f, "rms_norm n=" + std::to_string(n));
  }
}

TEST_F(ElementwiseTest, RopeMatchesCpuForBothLayoutsAndLargePositions) {
  struct Case {
    int64_t tokens, heads, head_dim;
    RopeMode mode;
    float attention_scaling;
  };
  for (const Case& c :
       {Case{5, 4, 64, RopeMode::kNeox, 1.0f}, Case{3, 32, 128, RopeMode::kNeox, 1.0f},
        Case{7, 8, 128, RopeMode::kInterleaved, 1.0f}, Case{4, 6, 96, RopeMode::kNeox, 1.2f}}) {
    const int64_t half = c.head_dim / 2;
    std::vector<float> inv_freq(half);
    for (int64_t i = 0; i < half; ++i)
      inv_freq[i] = 1.0f / std::pow(500000.0f, static_cast<float>(2 * i) / c.head_dim);
    std::vector<int32_t> positions(c.tokens);
    for (int64_t t = 0; t < c.tokens; ++t) positions[t] = static_cast<int32_t>(t * 9973 % 131072);
    const auto x = random_floats(c.tokens * c.heads * c.head_dim, 4, -2, 2);
    std::vector<float> expected = x;
    kernels::apply_rope(expected.data(), positions.data(), inv_freq.data(), c.tokens, c.heads,
                        c.head_dim, c.mode, c.attention_scaling);
    DeviceBuffer<float> d_x(x), d_inv(inv_freq);
    DeviceBuffer<int32_t> d_pos(positions);
    cuda::apply_rope(d_x.get(), d_pos.get(), d_inv.get(), c.tokens, c.heads, c.head_dim, c.mode,
                     c.attention_scaling, nullptr);
    // CUDA's sincosf is within 2 ulp of glibc's after full range reduction, and the rotation may
    // be fused (FMA): a few 1e-7 relative of |x| <= 2, so 2e-6 absolute.
    expect_near_all(d_x.download(), expected, 2e-6f, 2e-6f, "rope d=" + std::to_string(c.head_dim));
  }
}

TEST_F(ElementwiseTest, SiluMulAndAddMatchCpu) {
  const int64_t n = 11008 * 3 + 5;
  const auto gate = random_floats(n, 5, -10, 10);
  const auto up = random_floats(n, 6, -3, 3);
  std::vector<float> expected(n);
  kernels::silu_mul(gate.data(), up.data(), expected.data(), n);
  DeviceBuffer<float> d_gate(gate), d_up(up), d_out(n);
  cuda::silu_mul(d_gate.get(), d_up.get(), d_out.get(), n, nullptr);
  // expf is within 2 ulp of glibc's exp, then one addition, one division and one product: a few
  // ulp, so 2e-6 relative.
  expect_near_all(d_out.download(), expected, 1e-7f, 2e-6f, "silu_mul");

  std::vector<float> y = random_floats(n, 7), sum = y;
  kernels::add_inplace(sum.data(), up.data(), n);
  DeviceBuffer<float> d_y(y);
  cuda::add_inplace(d_y.get(), d_up.get(), n, nullptr);
  EXPECT_EQ(d_y.download(), sum);  // one IEEE addition: exact
}

TEST_F(ElementwiseTest, StoreKvWritesSlotsAndSkipsNegative) {
  const int64_t num_tokens = 11, kv_dim = 8 * 128, num_slots = 64;
  const std::vector<int64_t> slots = {3, 17, -1, 0, 63, 40, 41, 42, -1, 5, 16};
  const auto k = random_floats(num_tokens * kv_dim, 8), v = random_floats(num_tokens * kv_dim, 9);
  std::vector<float> k_pool = random_floats(num_slots * kv_dim, 10);
  std::vector<float> v_pool = random_floats(num_slots * kv_dim, 11);
  DeviceBuffer<float> d_k(k), d_v(v), d_kp(k_pool), d_vp(v_pool);
  DeviceBuffer<int64_t> d_slots(slots);
  kernels::store_kv(k.data(), v.data(), slots.data(), k_pool.data(), v_pool.data(), num_tokens,
                    kv_dim);
  cuda::store_kv(d_k.get(), d_v.get(), d_slots.get(), d_kp.get(), d_vp.get(), num_tokens, kv_dim,
                 nullptr);
  EXPECT_EQ(d_kp.download(), k_pool);  // copies: exact, untouched slots unchanged
  EXPECT_EQ(d_vp.download(), v_pool);
}

}  // namespace
}  // namespace lm::kernels::cuda
