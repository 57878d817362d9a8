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

// --kv-cache-dtype: the element size sets the bytes per token (the launcher sizes the pool, and
// MAX_BATCH_TOTAL_TOKENS, from it) and per block, and the tensors' dtype.
TEST(KvPool, TheDtypeSetsTheBytesOfATokenAndOfABlock) {
  const ModelConfig config = shape(32, 32, 128);  // Llama-2-7B
  EXPECT_EQ(KvPool::bytes_per_token(config, DType::kF32), 1 << 20);
  EXPECT_EQ(KvPool::bytes_per_token(config, DType::kF16), 1 << 19);
  EXPECT_EQ(KvPool::bytes_per_token(config, DType::kBF16), 1 << 19);
  EXPECT_EQ(KvPool::bytes_per_token(config, DType::kF8_E4M3), 1 << 18);
  EXPECT_EQ(KvPool::bytes_per_token(config, DType::kF8_E5M2), 1 << 18);
  const ModelConfig small = shape(2, 4, 64);
  KvPool pool(small, 600, 4, DType::kF16);  // > 1 MiB per layer buffer: mapped memory
  EXPECT_EQ(pool.dtype(), DType::kF16);
  EXPECT_EQ(pool.bytes_per_block(), 4 * KvPool::bytes_per_token(small, DType::kF16));
  for (const Tensor& t : pool.view().k) EXPECT_EQ(t.dtype, DType::kF16);
  // A returned block's pages go back in a 16-bit pool too: 4 tokens x 4 heads x 64 dims x 2
  // bytes is half a page, so blocks 6 and 7 make page 3.
  for (Tensor& t : pool.view().k) std::fill_n(t.as<uint16_t>(), t.numel(), uint16_t{0x3c00});
  pool.return_pages({6, 7});
  for (const Tensor& t : pool.view().k) {
    const auto* base = t.as<uint16_t>();
    for (int64_t i = 6 * 1024; i < 8 * 1024; ++i) ASSERT_EQ(base[i], 0) << i;
    ASSERT_EQ(base[6 * 1024 - 1], 0x3c00);
    ASSERT_EQ(base[8 * 1024], 0x3c00);
  }
}

TEST(KvPool, KvCacheDtypeNamesAndDefault) {
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e4m3fn"), DType::kF8_E4M3);  // TGI's names
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e5m2"), DType::kF8_E5M2);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), DType::kF8_E4M3);  // vLLM's
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e4m3"), DType::kF8_E4M3);
  EXPECT_EQ(parse_kv_cache_dtype("float16"), DType::kF16);
  EXPECT_EQ(parse_kv_cache_dtype("bf16"), DType::kBF16);
  EXPECT_EQ(parse_kv_cache_dtype("fp32"), DType::kF32);
  EXPECT_EQ(parse_kv_cache_dtype("auto"), std::nullopt);
  EXPECT_EQ(parse_kv_cache_dtype("int8"), std::nullopt);
  EXPECT_EQ(kv_cache_dtype_name(DType::kF8_E4M3), "fp8_e4m3fn");
  EXPECT_EQ(default_kv_cache_dtype(true), DType::kF16);
  EXPECT_EQ(default_kv_cache_dtype(false), DType::kF32);
}

}  // namespace
}  // namespace lm
