// Scalar reference of the int8 activation path: the quantizer and the per-format integer dots
// that the ISA variants (int8_dot_avx2.cc) are tested against, and the dispatching entry points.
#include "kernels/cpu/int8_dot.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/cpu/quant_blocks.h"

namespace lm::kernels {
namespace {

int32_t block_dot_q8_0(const uint8_t* block, const int8_t* q) {
  int32_t sum = 0;
  for (int i = 0; i < 32; ++i) sum += static_cast<int8_t>(block[2 + i]) * q[i];
  return sum;
}

// Nibbles minus `offset` (8 for Q4_0, 0 for Q4_1) against q.
int32_t block_dot_nibbles(const uint8_t* qs, int offset, const int8_t* q) {
  int32_t sum = 0;
  for (int i = 0; i < 16; ++i) {
    sum += ((qs[i] & 0x0f) - offset) * q[i];
    sum += ((qs[i] >> 4) - offset) * q[i + 16];
  }
  return sum;
}

}  // namespace

bool supports_int8_dot(RowFormat format) {
  return format == RowFormat::kQ8_0 || format == RowFormat::kQ4_0 || format == RowFormat::kQ4_1;
}

void quantize_row_q8_act_scalar(const float* x, BlockQ8Act* dst, int64_t k) {
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      const auto q = static_cast<int32_t>(std::nearbyint(x[i] * id));
      dst[b].qs[i] = static_cast<int8_t>(q);
      sum += q;
    }
    dst[b].d = d;
    dst[b].s = d * static_cast<float>(sum);
  }
}

float dot_row_q8_scalar(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / 32; ++b) {
    const BlockQ8Act& a = xq[b];
    switch (format) {
      case RowFormat::kQ8_0: {
        const uint8_t* block = bytes + b * quant::kQ8_0Bytes;
        sum += static_cast<float>(block_dot_q8_0(block, a.qs)) * (quant::load_f16(block) * a.d);
        break;
      }
      case RowFormat::kQ4_0: {
        const uint8_t* block = bytes + b * quant::kQ4_0Bytes;
        sum += static_cast<float>(block_dot_nibbles(block + 2, 8, a.qs)) *
               (quant::load_f16(block) * a.d);
        break;
      }
      case RowFormat::kQ4_1: {
        const uint8_t* block = bytes + b * quant::kQ4_1Bytes;
        sum += static_cast<float>(block_dot_nibbles(block + 4, 0, a.qs)) *
                   (quant::load_f16(block) * a.d) +
               quant::load_f16(block + 2) * a.s;
        break;
      }
      default:
        LM_CHECK_MSG(false, "no int8 dot for this row format");
    }
  }
  return sum;
}

void quantize_row_q8_act(const float* x, BlockQ8Act* dst, int64_t k, Isa isa) {
  LM_CHECK(k % 32 == 0);
  isa_kernels(isa).quantize_row_q8_act(x, dst, k);
}

float dot_row_q8(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k, Isa isa) {
  LM_CHECK(k % 32 == 0);
  LM_CHECK_MSG(supports_int8_dot(format), "no int8 dot for this row format");
  return isa_kernels(isa).dot_row_q8(format, row, xq, k);
}

}  // namespace lm::kernels
