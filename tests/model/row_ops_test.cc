// The ops that a prefill splits over the pool by rows (residual add, RoPE from a forward's cos /
// sin tables, the K/V writes) give the same bits as one call of their kernel over every row: a
// prompt's result must not depend on how many threads ran it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/kv_format.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rope.h"
#include "ops/layers.h"
#include "tensor/tensor.h"

namespace lm {
namespace {

// A prefill's worth of rows: 300 tokens x 9 heads x 64 dims (SmolLM2's q) is well over the
// size from which the ops use the pool.
constexpr int64_t kTokens = 300, kHeads = 9, kHeadDim = 64;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor view(std::vector<float>& v, int64_t rows) {
  return Tensor{DType::kF32, {rows, static_cast<int64_t>(v.size()) / rows}, v.data(), Device::kCpu};
}

TEST(RowOps, AddOverThePoolMatchesOneKernelCall) {
  std::vector<float> y = random_floats(kTokens * kHeads * kHeadDim, 1);
  const std::vector<float> x = random_floats(y.size(), 2);
  std::vector<float> expected = y;
  kernels::add_inplace(expected.data(), x.data(), static_cast<int64_t>(x.size()));
  std::vector<float> x_copy = x;
  Tensor y_view = view(y, kTokens);
  ThreadPool pool(3);
  ops::add(y_view, view(x_copy, kTokens), pool);
  EXPECT_EQ(0, std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)));
}

// Both pair layouts, whole and partial rotary dims, a scaling other than 1, positions out of
// order (a batch of sequences): the tables computed once and applied by rows on three threads
// rotate every head as apply_rope does.
TEST(RowOps, RopeFromTablesOverThePoolMatchesApplyRope) {
  std::vector<int32_t> positions(kTokens);
  std::mt19937 rng(3);
  for (int32_t& p : positions) p = static_cast<int32_t>(rng() % 4096);
  ThreadPool pool(3);
  for (const int64_t rotary_dim : {kHeadDim, int64_t{32}}) {
    const int64_t half = rotary_dim / 2;
    std::vector<float> inv_freq(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i)
      inv_freq[i] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / rotary_dim);
    for (const auto mode : {ops::RopeMode::kNeox, ops::RopeMode::kInterleaved}) {
      std::vector<float> x = random_floats(kTokens * kHeads * kHeadDim, 4);
      std::vector<float> expected = x;
      kernels::apply_rope(
          expected.data(), positions.data(), inv_freq.data(), kTokens, kHeads, kHeadDim,
          mode == ops::RopeMode::kNeox ? kernels::RopeMode::kNeox : kernels::RopeMode::kInterleaved,
          0.75f, rotary_dim);
      std::vector<float> cos(static_cast<size_t>(kTokens * half)), sin(cos.size());
      ops::rope_cos_sin(positions.data(), kTokens, inv_freq.data(), half, 0.75f, cos.data(),
                        sin.data());
      Tensor x_view = view(x, kTokens);
      ops::rope(x_view, kHeadDim, cos.data(), sin.data(), mode, rotary_dim, pool);
      EXPECT_EQ(0, std::memcmp(x.data(), expected.data(), x.size() * sizeof(float)))
          << "rotary_dim " << rotary_dim << " mode " << static_cast<int>(mode);
    }
  }
}

// Tokens to shuffled slots of a pool with more slots than tokens, one skipped (-1), in each
// cache dtype: the bytes of both pools are those of one store_kv kernel call.
TEST(RowOps, StoreKvOverThePoolMatchesOneKernelCall) {
  constexpr int64_t kKvHeads = 3, kBlocks = 40, kBlockSize = 16;
  constexpr int64_t kv_dim = kKvHeads * kHeadDim;
  std::vector<float> k = random_floats(kTokens * kv_dim, 5), v = random_floats(k.size(), 6);
  std::vector<int64_t> slots(kBlocks * kBlockSize);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(7));
  slots.resize(kTokens);
  slots[17] = -1;
  ThreadPool pool(3);
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8_E4M3}) {
    Buffer k_pool({kBlocks, kBlockSize, kKvHeads, kHeadDim}, dtype);
    Buffer v_pool({kBlocks, kBlockSize, kKvHeads, kHeadDim}, dtype);
    const auto pool_bytes =
        static_cast<size_t>(k_pool.view().row_bytes() * kBlocks * kBlockSize * kKvHeads);
    std::memset(k_pool.view().data, 0xAB, pool_bytes);
    std::memset(v_pool.view().data, 0xAB, pool_bytes);
    std::vector<uint8_t> k_expected(pool_bytes, 0xAB), v_expected(pool_bytes, 0xAB);
    const kernels::KvFormat format = dtype == DType::kF32    ? kernels::KvFormat::kF32
                                     : dtype == DType::kF16  ? kernels::KvFormat::kF16
                                     : dtype == DType::kBF16 ? kernels::KvFormat::kBF16
                                                             : kernels::KvFormat::kF8E4M3;
    kernels::store_kv(k.data(), v.data(), slots.data(), k_expected.data(), v_expected.data(),
                      kTokens, kv_dim, format);
    Tensor k_pool_view = k_pool.view(), v_pool_view = v_pool.view();
    ops::store_kv(view(k, kTokens), view(v, kTokens), slots.data(), k_pool_view, v_pool_view, pool);
    EXPECT_EQ(0, std::memcmp(k_pool_view.data, k_expected.data(), pool_bytes)) << dtype_name(dtype);
    EXPECT_EQ(0, std::memcmp(v_pool_view.data, v_expected.data(), pool_bytes)) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace lm
