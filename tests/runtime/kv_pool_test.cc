// KvPool::return_pages: a returned block's whole pages read as zeros in every layer, K and V,
// while its neighbours keep their bytes (also when blocks do not fill whole pages).
#include "runtime/kv_pool.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace lm {
namespace {

ModelConfig shape(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim) {
  ModelConfig config;
  config.num_hidden_layers = num_layers;
  config.num_key_value_heads = num_kv_heads;
  config.head_dim = head_dim;
  return config;
}

// Every float of every layer's K and V set to 1.
void fill_ones(KvPool& pool) {
  for (auto* tensors : {&pool.view().k, &pool.view().v}) {
    for (Tensor& t : *tensors) std::fill_n(t.as<float>(), t.numel(), 1.0f);
  }
}

// Floats of block `id` in one layer's K or V.
std::span<const float> block_floats(const Tensor& t, int64_t block_floats_count, int32_t id) {
  return {t.as<float>() + id * block_floats_count, static_cast<size_t>(block_floats_count)};
}

TEST(KvPool, AReturnedBlockReadsAsZerosAndItsNeighboursKeepTheirBytes) {
  ASSERT_EQ(::sysconf(_SC_PAGESIZE), 4096);
  // A block is 4 tokens x 4 heads x 64 dims x 4 bytes = one page per layer, K and V apart.
  const ModelConfig config = shape(2, 4, 64);
  KvPool pool(config, 300, 4);  // > 1 MiB per layer buffer: mapped memory
  EXPECT_EQ(pool.bytes_per_block(), 2 * 2 * 4096);
  fill_ones(pool);
  pool.return_pages({5, 7});
  const int64_t n = 4 * 4 * 64;
  for (auto* tensors : {&pool.view().k, &pool.view().v}) {
    for (const Tensor& t : *tensors) {
      for (int32_t id : {5, 7})
        for (float x : block_floats(t, n, id)) ASSERT_EQ(x, 0.0f) << "block " << id;
      for (int32_t id : {4, 6, 8})
        for (float x : block_floats(t, n, id)) ASSERT_EQ(x, 1.0f) << "block " << id;
    }
  }
}

TEST(KvPool, OnlyWholePagesInsideABlockAreReturned) {
  // 4 tokens x 3 heads x 64 dims x 4 bytes = 3 KiB: blocks straddle pages. Block 3 spans bytes
  // [9 KiB, 12 KiB): no whole page, so nothing is returned; blocks 4-7 span [12 KiB, 24 KiB):
  // pages 3, 4 and 5, exactly.
  const ModelConfig config = shape(1, 3, 64);
  KvPool pool(config, 400, 4);
  fill_ones(pool);
  pool.return_pages({3});
  const int64_t n = 4 * 3 * 64;
  for (const Tensor& t : pool.view().k)
    for (float x : block_floats(t, n, 3)) ASSERT_EQ(x, 1.0f);
  pool.return_pages({4, 5, 6, 7});
  for (const Tensor& t : pool.view().k) {
    const float* base = t.as<float>();
    for (int64_t i = 3 * 1024; i < 6 * 1024; ++i) ASSERT_EQ(base[i], 0.0f) << i;
    // Block 4 starts at 12 KiB, a page boundary: its first float is zero, block 3 untouched.
    for (float x : block_floats(t, n, 3)) ASSERT_EQ(x, 1.0f);
    for (float x : block_floats(t, n, 8)) ASSERT_EQ(x, 1.0f);
  }
}

}  // namespace
}  // namespace lm
