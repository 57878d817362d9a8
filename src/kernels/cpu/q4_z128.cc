// Q4_Z128 (q4_z128_blocks.h): the scalar dequantization and dots, and an AWQ-style quantizer
// that makes test data.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/q4_z128_blocks.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

// Block b's 128 nibbles in element order.
void block_nibbles(const uint8_t* block, uint8_t (&q)[q4z::kBlock]) {
  const uint8_t* qs = block + q4z::kQsOffset;
  for (int j = 0; j < q4z::kSubBlocks; ++j) {
    for (int i = 0; i < 16; ++i) {
      q[32 * j + i] = qs[16 * j + i] & 0x0f;
      q[32 * j + 16 + i] = qs[16 * j + i] >> 4;
    }
  }
}

}  // namespace

void dequantize_row_q4_z128(const void* src, float* dst, int64_t k) {
  LM_CHECK(k % q4z::kBlock == 0);
  const auto* bytes = static_cast<const uint8_t*>(src);
  uint8_t q[q4z::kBlock];
  for (int64_t b = 0; b < k / q4z::kBlock; ++b, dst += q4z::kBlock) {
    const uint8_t* block = bytes + b * q4z::kBytes;
    const float d = quant::load_f16(block + q4z::kDOffset);
    const int z = block[q4z::kZOffset];
    block_nibbles(block, q);
    for (int i = 0; i < q4z::kBlock; ++i) dst[i] = static_cast<float>(q[i] - z) * d;
  }
}

float dot_row_q4_z128(const void* row, const float* x, int64_t k) {
  LM_CHECK(k % q4z::kBlock == 0);
  float values[q4z::kBlock];
  float sum = 0.0f;
  for (int64_t b = 0; b < k / q4z::kBlock; ++b) {
    dequantize_row_q4_z128(static_cast<const uint8_t*>(row) + b * q4z::kBytes, values, q4z::kBlock);
    for (int i = 0; i < q4z::kBlock; ++i) sum += values[i] * x[b * q4z::kBlock + i];
  }
  return sum;
}

float dot_row_q8_q4_z128(const void* row, const BlockQ8Act* xq, int64_t k) {
  LM_CHECK(k % q4z::kBlock == 0);
  const auto* bytes = static_cast<const uint8_t*>(row);
  uint8_t q[q4z::kBlock];
  float sum = 0.0f;
  for (int64_t b = 0; b < k / q4z::kBlock; ++b) {
    const uint8_t* block = bytes + b * q4z::kBytes;
    const float d = quant::load_f16(block + q4z::kDOffset);
    const float minimum = -(d * static_cast<float>(block[q4z::kZOffset]));
    block_nibbles(block, q);
    // The interleaved kernels' operations (q4_z128_blocks.h): the sub-blocks' scaled integer
    // sums, times d, plus the minimum times the block's activation sum.
    const BlockQ8Act* a = xq + b * q4z::kSubBlocks;
    float t = 0.0f;
    for (int j = 0; j < q4z::kSubBlocks; ++j) {
      int32_t qx = 0;
      for (int i = 0; i < 32; ++i) qx += q[32 * j + i] * a[j].qs[i];
      t += a[j].d * static_cast<float>(qx);
    }
    sum += d * t + minimum * (((a[0].s + a[1].s) + a[2].s) + a[3].s);
  }
  return sum;
}

bool q4_z128_fits_q4_0(const void* row, int64_t k) {
  LM_CHECK(k % q4z::kBlock == 0);
  const auto* bytes = static_cast<const uint8_t*>(row);
  uint8_t q[q4z::kBlock];
  for (int64_t b = 0; b < k / q4z::kBlock; ++b) {
    const uint8_t* block = bytes + b * q4z::kBytes;
    const int z = block[q4z::kZOffset];
    block_nibbles(block, q);
    for (int i = 0; i < q4z::kBlock; ++i) {
      if (q[i] - z < -8 || q[i] - z > 7) return false;
    }
  }
  return true;
}

void q4_z128_to_ggml_row(RowFormat format, const void* src, void* dst, int64_t k) {
  LM_CHECK(k % q4z::kBlock == 0 && (format == RowFormat::kQ8_0 || format == RowFormat::kQ4_0));
  const auto* bytes = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t out_bytes = row_format_info(format).block_bytes;
  uint8_t q[q4z::kBlock];
  for (int64_t b = 0; b < k / q4z::kBlock; ++b) {
    const uint8_t* block = bytes + b * q4z::kBytes;
    const int z = block[q4z::kZOffset];
    block_nibbles(block, q);
    for (int j = 0; j < q4z::kSubBlocks; ++j, out += out_bytes) {
      std::memcpy(out, block + q4z::kDOffset, 2);  // the same fp16 d
      const uint8_t* v = q + 32 * j;
      if (format == RowFormat::kQ8_0) {
        for (int i = 0; i < 32; ++i)
          out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(v[i] - z));
      } else {
        for (int i = 0; i < 16; ++i) {
          const int lo = v[i] - z + 8, hi = v[16 + i] - z + 8;
          LM_CHECK_MSG(lo >= 0 && lo <= 15 && hi >= 0 && hi <= 15, "not a Q4_0 level");
          out[2 + i] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
    }
  }
}

// AutoAWQ's asymmetric quantizer per block of 128 (its group size): d = max(max - min, 1e-5) /
// 15, stored as fp16, z = clamp(-round(min / d), 0, 15), nibble = clamp(round(x / d) + z, 0, 15),
// with the stored d in the divisions.
void quantize_row_q4_z128(const float* src, void* dst, int64_t k) {
  LM_CHECK(k % q4z::kBlock == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / q4z::kBlock; ++b, src += q4z::kBlock) {
    uint8_t* block = out + b * q4z::kBytes;
    const auto [lo, hi] = std::minmax_element(src, src + q4z::kBlock);
    quant::store_f16(block + q4z::kDOffset, std::max(*hi - *lo, 1e-5f) / 15.0f);
    const float d = quant::load_f16(block + q4z::kDOffset);
    const int z = std::clamp(static_cast<int>(-std::nearbyint(*lo / d)), 0, q4z::kMaxZero);
    block[q4z::kZOffset] = static_cast<uint8_t>(z);
    block[q4z::kZOffset + 1] = 0;
    uint8_t* qs = block + q4z::kQsOffset;
    auto nibble = [&](int i) {
      return static_cast<uint8_t>(
          std::clamp(static_cast<int>(std::nearbyint(src[i] / d)) + z, 0, 15));
    };
    for (int j = 0; j < q4z::kSubBlocks; ++j) {
      for (int i = 0; i < 16; ++i)
        qs[16 * j + i] = static_cast<uint8_t>(nibble(32 * j + i) | (nibble(32 * j + 16 + i) << 4));
    }
  }
}

}  // namespace lm::kernels
