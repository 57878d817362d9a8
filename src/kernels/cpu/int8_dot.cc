// Scalar reference of the int8 activation path: the quantizer and the per-format integer dots
// that the ISA variants (int8_dot_avx2.cc) are tested against, and the dispatching entry points.
#include "kernels/cpu/int8_dot.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/cpu/kquant_blocks.h"
#include "kernels/cpu/lowbit_blocks.h"
#include "kernels/cpu/q4_z128_blocks.h"
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

// Q5 values (nibble | fifth bit) minus `offset` (16 for Q5_0, 0 for Q5_1) against q.
int32_t block_dot_q5(const uint8_t* qh_bytes, const uint8_t* qs, int offset, const int8_t* q) {
  const uint32_t qh = quant::load_qh(qh_bytes);
  int32_t sum = 0;
  for (int i = 0; i < 16; ++i) {
    const int lo = (qs[i] & 0x0f) | static_cast<int>(((qh >> i) & 1) << 4);
    const int hi = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1) << 4);
    sum += (lo - offset) * q[i] + (hi - offset) * q[i + 16];
  }
  return sum;
}

// A K-quant row against 8 activation blocks per super-block: exact int32 sums per group (Q6_K:
// per half-group, with its -32 offset folded in), one fp32 multiply-add per group.
float dot_row_q8_kquant(RowFormat format, const uint8_t* row, const BlockQ8Act* xq, int64_t k) {
  const int64_t block_bytes = row_format_info(format).block_bytes;
  uint8_t q[32];
  float sum = 0.0f;
  for (int64_t b = 0; b < k / 256; ++b) {
    const uint8_t* block = row + b * block_bytes;
    const BlockQ8Act* a = xq + b * kquant::kGroups;
    if (format == RowFormat::kQ6_K) {
      const float d = quant::load_f16(block + kquant::kQ6_KDOffset);
      const auto* scales = reinterpret_cast<const int8_t*>(block + kquant::kQ6_KScalesOffset);
      for (int g = 0; g < kquant::kGroups; ++g) {
        kquant::group_values_q6_k(block, g, q);
        int32_t group = 0;
        for (int h = 0; h < 2; ++h) {
          int32_t qx = 0;
          for (int l = 16 * h; l < 16 * h + 16; ++l) qx += (q[l] - 32) * a[g].qs[l];
          group += scales[2 * g + h] * qx;
        }
        sum += static_cast<float>(group) * (d * a[g].d);
      }
      continue;
    }
    const float d = quant::load_f16(block);
    const float dmin = quant::load_f16(block + 2);
    uint8_t sc[8], mn[8];
    kquant::unpack_scales_k4(block + kquant::kScalesOffset, sc, mn);
    for (int g = 0; g < kquant::kGroups; ++g) {
      if (format == RowFormat::kQ4_K) {
        kquant::group_values_q4_k(block, g, q);
      } else {
        kquant::group_values_q5_k(block, g, q);
      }
      int32_t qx = 0;
      for (int l = 0; l < 32; ++l) qx += q[l] * a[g].qs[l];
      sum += static_cast<float>(qx) * (d * static_cast<float>(sc[g]) * a[g].d) -
             dmin * static_cast<float>(mn[g]) * a[g].s;
    }
  }
  return sum;
}

// A low-bit row (lowbit_blocks.h) against one activation block per group of 32: per half of 16,
// the exact int32 sums of q * x and of x; per group, sc * (q . x) and mn * sum(x) in int32, then
// one fp32 multiply-add each (the min term only for Q2_K).
float dot_row_q8_lowbit(RowFormat format, const uint8_t* row, const BlockQ8Act* xq, int64_t k) {
  const RowFormatInfo& info = row_format_info(format);
  const int groups = lowbit::groups_per_block(format);
  lowbit::Group group;
  float sum = 0.0f;
  for (int64_t b = 0; b < k / info.block_size; ++b) {
    const uint8_t* block = row + b * info.block_bytes;
    const float d = fp16_to_fp32(lowbit::d_bits(format, block));
    const float dmin = fp16_to_fp32(lowbit::dmin_bits(format, block));
    for (int g = 0; g < groups; ++g) {
      const BlockQ8Act& a = xq[b * groups + g];
      lowbit::decode_group(format, block, g, group);
      int32_t scaled = 0, mins = 0;
      for (int h = 0; h < 2; ++h) {
        int32_t qx = 0, sx = 0;
        for (int l = 16 * h; l < 16 * h + 16; ++l) {
          qx += group.q[l] * a.qs[l];
          sx += a.qs[l];
        }
        scaled += group.sc[h] * qx;
        mins += group.mn[h] * sx;
      }
      sum += static_cast<float>(scaled) * (d * a.d);
      if (format == RowFormat::kQ2_K) sum -= static_cast<float>(mins) * (dmin * a.d);
    }
  }
  return sum;
}

}  // namespace

bool supports_int8_dot(RowFormat format) {
  return format == RowFormat::kQ8_0 || format == RowFormat::kQ4_0 || format == RowFormat::kQ4_1 ||
         format == RowFormat::kQ5_0 || format == RowFormat::kQ5_1 || is_kquant(format) ||
         is_lowbit(format) || format == RowFormat::kQ4_Z128;
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
  if (is_kquant(format)) return dot_row_q8_kquant(format, bytes, xq, k);
  if (is_lowbit(format)) return dot_row_q8_lowbit(format, bytes, xq, k);
  if (format == RowFormat::kQ4_Z128) return dot_row_q8_q4_z128(row, xq, k);
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
      case RowFormat::kQ5_0: {
        const uint8_t* block = bytes + b * quant::kQ5_0Bytes;
        sum += static_cast<float>(block_dot_q5(block + 2, block + 6, 16, a.qs)) *
               (quant::load_f16(block) * a.d);
        break;
      }
      case RowFormat::kQ5_1: {
        const uint8_t* block = bytes + b * quant::kQ5_1Bytes;
        sum += static_cast<float>(block_dot_q5(block + 4, block + 8, 0, a.qs)) *
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

void dot_rows_q8_scalar(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t xq_stride,
                        int64_t m, int64_t k, float* out, int64_t out_stride) {
  for (int64_t i = 0; i < m; ++i)
    out[i * out_stride] = dot_row_q8_scalar(format, row, xq + i * xq_stride, k);
}

void dot_rows_q8(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t xq_stride,
                 int64_t m, int64_t k, float* out, int64_t out_stride, Isa isa) {
  LM_CHECK(k % 32 == 0);
  LM_CHECK_MSG(supports_int8_dot(format), "no int8 dot for this row format");
  isa_kernels(isa).dot_rows_q8(format, row, xq, xq_stride, m, k, out, out_stride);
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
