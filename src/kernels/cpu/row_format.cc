// Row format table, ISA dispatch for whole-row kernels, and GGML's reference quantizers.
#include "kernels/cpu/row_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "kernels/cpu/bnb4_blocks.h"
#include "kernels/cpu/kquant_blocks.h"
#include "kernels/cpu/lowbit_blocks.h"
#include "kernels/cpu/q4_z128_blocks.h"
#include "kernels/cpu/quant_blocks.h"

namespace lm::kernels {

namespace {

// The block value of largest magnitude, with its sign: Q4_0 and Q5_0 map it to their most
// negative level, so it is exact and the asymmetric range is used on the side that needs it.
float signed_absmax(const float* block) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int i = 0; i < kQuantBlockSize; ++i) {
    if (std::fabs(block[i]) > amax) {
      amax = std::fabs(block[i]);
      max = block[i];
    }
  }
  return max;
}

// Smallest and largest value of a block (Q4_1 and Q5_1 store min and (max - min) / levels).
std::pair<float, float> min_max(const float* block) {
  const auto [lo, hi] = std::minmax_element(block, block + kQuantBlockSize);
  return {*lo, *hi};
}

}  // namespace

const RowFormatInfo& row_format_info(RowFormat format) {
  static constexpr RowFormatInfo kF32{"f32", 1, 4};
  static constexpr RowFormatInfo kF16{"f16", 1, 2};
  static constexpr RowFormatInfo kBF16{"bf16", 1, 2};
  static constexpr RowFormatInfo kQ8_0{"q8_0", kQuantBlockSize, quant::kQ8_0Bytes};
  static constexpr RowFormatInfo kQ4_0{"q4_0", kQuantBlockSize, quant::kQ4_0Bytes};
  static constexpr RowFormatInfo kQ4_1{"q4_1", kQuantBlockSize, quant::kQ4_1Bytes};
  static constexpr RowFormatInfo kQ5_0{"q5_0", kQuantBlockSize, quant::kQ5_0Bytes};
  static constexpr RowFormatInfo kQ5_1{"q5_1", kQuantBlockSize, quant::kQ5_1Bytes};
  static constexpr RowFormatInfo kQ4_K{"q4_k", kquant::kSuperBlock, kquant::kQ4_KBytes};
  static constexpr RowFormatInfo kQ5_K{"q5_k", kquant::kSuperBlock, kquant::kQ5_KBytes};
  static constexpr RowFormatInfo kQ6_K{"q6_k", kquant::kSuperBlock, kquant::kQ6_KBytes};
  static constexpr RowFormatInfo kQ2_K{"q2_k", kquant::kSuperBlock, lowbit::kQ2_KBytes};
  static constexpr RowFormatInfo kQ3_K{"q3_k", kquant::kSuperBlock, lowbit::kQ3_KBytes};
  static constexpr RowFormatInfo kIQ4_NL{"iq4_nl", kQuantBlockSize, lowbit::kIQ4_NLBytes};
  static constexpr RowFormatInfo kIQ4_XS{"iq4_xs", kquant::kSuperBlock, lowbit::kIQ4_XSBytes};
  static constexpr RowFormatInfo kQ4_Z128{"q4_z128", q4z::kBlock, q4z::kBytes};
  static constexpr RowFormatInfo kNF4{"nf4", bnb4::kBlock, bnb4::kBlockBytes};
  static constexpr RowFormatInfo kFP4{"fp4", bnb4::kBlock, bnb4::kBlockBytes};
  switch (format) {
    case RowFormat::kF32:
      return kF32;
    case RowFormat::kF16:
      return kF16;
    case RowFormat::kBF16:
      return kBF16;
    case RowFormat::kQ8_0:
      return kQ8_0;
    case RowFormat::kQ4_0:
      return kQ4_0;
    case RowFormat::kQ4_1:
      return kQ4_1;
    case RowFormat::kQ5_0:
      return kQ5_0;
    case RowFormat::kQ5_1:
      return kQ5_1;
    case RowFormat::kQ4_K:
      return kQ4_K;
    case RowFormat::kQ5_K:
      return kQ5_K;
    case RowFormat::kQ6_K:
      return kQ6_K;
    case RowFormat::kQ2_K:
      return kQ2_K;
    case RowFormat::kQ3_K:
      return kQ3_K;
    case RowFormat::kIQ4_NL:
      return kIQ4_NL;
    case RowFormat::kIQ4_XS:
      return kIQ4_XS;
    case RowFormat::kQ4_Z128:
      return kQ4_Z128;
    case RowFormat::kNF4:
      return kNF4;
    case RowFormat::kFP4:
      return kFP4;
  }
  LM_CHECK_MSG(false, "unknown RowFormat");
  return kF32;
}

bool is_kquant(RowFormat format) {
  return format == RowFormat::kQ4_K || format == RowFormat::kQ5_K || format == RowFormat::kQ6_K;
}

bool is_bnb4(RowFormat format) { return format == RowFormat::kNF4 || format == RowFormat::kFP4; }

bool is_lowbit(RowFormat format) {
  return format == RowFormat::kQ2_K || format == RowFormat::kQ3_K || format == RowFormat::kIQ4_NL ||
         format == RowFormat::kIQ4_XS;
}

int64_t row_bytes(RowFormat format, int64_t k) {
  const RowFormatInfo& info = row_format_info(format);
  LM_CHECK(k >= 0 && k % info.block_size == 0);
  return k / info.block_size * info.block_bytes;
}

void dequantize_row(RowFormat format, const void* src, float* dst, int64_t k, Isa isa) {
  LM_CHECK(k % row_format_info(format).block_size == 0);
  isa_kernels(isa).dequantize_row(format, src, dst, k);
}

float dot_row(RowFormat format, const void* row, const float* x, int64_t k, Isa isa) {
  LM_CHECK(k % row_format_info(format).block_size == 0);
  return isa_kernels(isa).dot_row(format, row, x, k);
}

void quantize_row_q8_0(const float* src, void* dst, int64_t k) {
  LM_CHECK(k % kQuantBlockSize == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / kQuantBlockSize; ++b, src += kQuantBlockSize) {
    float amax = 0.0f;
    for (int i = 0; i < kQuantBlockSize; ++i) amax = std::max(amax, std::fabs(src[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* block = out + b * quant::kQ8_0Bytes;
    quant::store_f16(block, d);
    for (int i = 0; i < kQuantBlockSize; ++i) {
      block[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::round(src[i] * id)));
    }
  }
}

void quantize_row_q4_0(const float* src, void* dst, int64_t k) {
  LM_CHECK(k % kQuantBlockSize == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / kQuantBlockSize; ++b, src += kQuantBlockSize) {
    const float d = signed_absmax(src) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* block = out + b * quant::kQ4_0Bytes;
    quant::store_f16(block, d);
    for (int i = 0; i < kQuantBlockSize / 2; ++i) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(src[i] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(src[i + 16] * id + 8.5f)));
      block[2 + i] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_row_q4_1(const float* src, void* dst, int64_t k) {
  LM_CHECK(k % kQuantBlockSize == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / kQuantBlockSize; ++b, src += kQuantBlockSize) {
    const auto [min, max] = min_max(src);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* block = out + b * quant::kQ4_1Bytes;
    quant::store_f16(block, d);
    quant::store_f16(block + 2, min);
    for (int i = 0; i < kQuantBlockSize / 2; ++i) {
      const int lo =
          std::min(15, static_cast<int>(static_cast<int8_t>((src[i] - min) * id + 0.5f)));
      const int hi =
          std::min(15, static_cast<int>(static_cast<int8_t>((src[i + 16] - min) * id + 0.5f)));
      block[4 + i] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_row_q5_0(const float* src, void* dst, int64_t k) {
  LM_CHECK(k % kQuantBlockSize == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / kQuantBlockSize; ++b, src += kQuantBlockSize) {
    const float d = signed_absmax(src) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* block = out + b * quant::kQ5_0Bytes;
    quant::store_f16(block, d);
    uint32_t qh = 0;
    for (int i = 0; i < kQuantBlockSize / 2; ++i) {
      const int lo = std::min(31, static_cast<int>(static_cast<int8_t>(src[i] * id + 16.5f)));
      const int hi = std::min(31, static_cast<int>(static_cast<int8_t>(src[i + 16] * id + 16.5f)));
      block[6 + i] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      qh |= static_cast<uint32_t>((lo >> 4) & 1) << i;
      qh |= static_cast<uint32_t>((hi >> 4) & 1) << (i + 16);
    }
    std::memcpy(block + 2, &qh, sizeof(qh));
  }
}

void quantize_row_q5_1(const float* src, void* dst, int64_t k) {
  LM_CHECK(k % kQuantBlockSize == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / kQuantBlockSize; ++b, src += kQuantBlockSize) {
    const auto [min, max] = min_max(src);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* block = out + b * quant::kQ5_1Bytes;
    quant::store_f16(block, d);
    quant::store_f16(block + 2, min);
    uint32_t qh = 0;
    for (int i = 0; i < kQuantBlockSize / 2; ++i) {
      const int lo = static_cast<int>(static_cast<uint8_t>((src[i] - min) * id + 0.5f));
      const int hi = static_cast<int>(static_cast<uint8_t>((src[i + 16] - min) * id + 0.5f));
      block[8 + i] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
      qh |= static_cast<uint32_t>((lo >> 4) & 1) << i;
      qh |= static_cast<uint32_t>((hi >> 4) & 1) << (i + 16);
    }
    std::memcpy(block + 4, &qh, sizeof(qh));
  }
}

}  // namespace lm::kernels
