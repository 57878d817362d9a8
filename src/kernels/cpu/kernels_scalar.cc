// Scalar reference inner loops: the plain-C++ definition of every per-ISA kernel, and the
// fallback on CPUs without AVX2. Written for clarity; other ISAs are tested against these.
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/bf16_pairs.h"
#include "kernels/cpu/bnb4_blocks.h"
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kquant_blocks.h"
#include "kernels/cpu/lowbit_blocks.h"
#include "kernels/cpu/panels16.h"
#include "kernels/cpu/panels_fp8.h"
#include "kernels/cpu/q4_z128_blocks.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

float dot_f32(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void scale_f32(float a, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

// Dequantizes one 32-element block into out.
void dequantize_block(RowFormat format, const uint8_t* block, float* out) {
  switch (format) {
    case RowFormat::kQ8_0: {
      const float d = quant::load_f16(block);
      for (int i = 0; i < 32; ++i)
        out[i] = static_cast<float>(static_cast<int8_t>(block[2 + i])) * d;
      return;
    }
    case RowFormat::kQ4_0: {
      const float d = quant::load_f16(block);
      for (int i = 0; i < 16; ++i) {
        out[i] = static_cast<float>((block[2 + i] & 0x0f) - 8) * d;
        out[i + 16] = static_cast<float>((block[2 + i] >> 4) - 8) * d;
      }
      return;
    }
    case RowFormat::kQ4_1: {
      const float d = quant::load_f16(block);
      const float m = quant::load_f16(block + 2);
      for (int i = 0; i < 16; ++i) {
        out[i] = static_cast<float>(block[4 + i] & 0x0f) * d + m;
        out[i + 16] = static_cast<float>(block[4 + i] >> 4) * d + m;
      }
      return;
    }
    case RowFormat::kQ5_0:
    case RowFormat::kQ5_1: {
      const bool q5_1 = format == RowFormat::kQ5_1;
      const float d = quant::load_f16(block);
      const float m = q5_1 ? quant::load_f16(block + 2) : 0.0f;
      const uint32_t qh = quant::load_qh(block + (q5_1 ? 4 : 2));
      const uint8_t* qs = block + (q5_1 ? 8 : 6);
      const int offset = q5_1 ? 0 : 16;
      for (int i = 0; i < 16; ++i) {
        const int lo = (qs[i] & 0x0f) | static_cast<int>(((qh >> i) & 1) << 4);
        const int hi = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1) << 4);
        out[i] = static_cast<float>(lo - offset) * d + m;
        out[i + 16] = static_cast<float>(hi - offset) * d + m;
      }
      return;
    }
    default:
      LM_CHECK_MSG(false, "not a block format");
  }
}

// Dequantizes one 256-element K-quant super-block into out, in GGML's order of operations.
void dequantize_superblock(RowFormat format, const uint8_t* block, float* out) {
  uint8_t q[32];
  if (format == RowFormat::kQ6_K) {
    const float d = quant::load_f16(block + kquant::kQ6_KDOffset);
    const auto* scales = reinterpret_cast<const int8_t*>(block + kquant::kQ6_KScalesOffset);
    for (int g = 0; g < kquant::kGroups; ++g, out += 32) {
      kquant::group_values_q6_k(block, g, q);
      for (int l = 0; l < 32; ++l) {
        out[l] = d * static_cast<float>(scales[2 * g + l / 16]) * static_cast<float>(q[l] - 32);
      }
    }
    return;
  }
  const float d = quant::load_f16(block);
  const float dmin = quant::load_f16(block + 2);
  uint8_t sc[8], mn[8];
  kquant::unpack_scales_k4(block + kquant::kScalesOffset, sc, mn);
  for (int g = 0; g < kquant::kGroups; ++g, out += 32) {
    if (format == RowFormat::kQ4_K) {
      kquant::group_values_q4_k(block, g, q);
    } else {
      kquant::group_values_q5_k(block, g, q);
    }
    const float scale = d * static_cast<float>(sc[g]);
    const float min = dmin * static_cast<float>(mn[g]);
    for (int l = 0; l < 32; ++l) out[l] = scale * static_cast<float>(q[l]) - min;
  }
}

// Dequantizes one low-bit block (32 values for IQ4_NL, else 256) into out, in gguf-py's order of
// operations: (d * sc) * q - (dmin * mn), so the values are gguf-py's, bit for bit.
void dequantize_lowbit_block(RowFormat format, const uint8_t* block, float* out) {
  const float d = fp16_to_fp32(lowbit::d_bits(format, block));
  const float dmin = fp16_to_fp32(lowbit::dmin_bits(format, block));
  lowbit::Group group;
  for (int g = 0; g < lowbit::groups_per_block(format); ++g, out += 32) {
    lowbit::decode_group(format, block, g, group);
    for (int l = 0; l < 32; ++l) {
      const float scale = d * static_cast<float>(group.sc[l / 16]);
      const float min = dmin * static_cast<float>(group.mn[l / 16]);
      out[l] = scale * static_cast<float>(group.q[l]) - min;
    }
  }
}

// One block of any quantized format: 32 values, 256 for the K-quants, 64 for bitsandbytes' NF4/FP4
// (row_format_info's block_size).
void dequantize_quant_block(RowFormat format, const uint8_t* block, float* out) {
  if (is_bnb4(format)) {
    bnb4::dequantize_block(format == RowFormat::kNF4 ? bnb4::kNF4Code : bnb4::kFP4Code, block, out);
  } else if (is_lowbit(format)) {
    dequantize_lowbit_block(format, block, out);
  } else if (is_kquant(format)) {
    dequantize_superblock(format, block, out);
  } else {
    dequantize_block(format, block, out);
  }
}

void dequantize_row(RowFormat format, const void* src, float* dst, int64_t k) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (format) {
    case RowFormat::kF32: {
      const auto* f = static_cast<const float*>(src);
      for (int64_t i = 0; i < k; ++i) dst[i] = f[i];
      return;
    }
    case RowFormat::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < k; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case RowFormat::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < k; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case RowFormat::kQ4_Z128:
      dequantize_row_q4_z128(src, dst, k);
      return;
    case RowFormat::kQ8_0:
    case RowFormat::kQ4_0:
    case RowFormat::kQ4_1:
    case RowFormat::kQ5_0:
    case RowFormat::kQ5_1:
    case RowFormat::kQ4_K:
    case RowFormat::kQ5_K:
    case RowFormat::kQ6_K:
    case RowFormat::kQ2_K:
    case RowFormat::kQ3_K:
    case RowFormat::kIQ4_NL:
    case RowFormat::kIQ4_XS:
    case RowFormat::kNF4:
    case RowFormat::kFP4: {
      const RowFormatInfo& info = row_format_info(format);
      for (int64_t b = 0; b < k / info.block_size; ++b) {
        dequantize_quant_block(format, bytes + b * info.block_bytes, dst + b * info.block_size);
      }
      return;
    }
  }
}

float dot_row(RowFormat format, const void* row, const float* x, int64_t k) {
  switch (format) {
    case RowFormat::kF32:
      return dot_f32(static_cast<const float*>(row), x, k);
    case RowFormat::kF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      float sum = 0.0f;
      for (int64_t i = 0; i < k; ++i) sum += fp16_to_fp32(h[i]) * x[i];
      return sum;
    }
    case RowFormat::kBF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      float sum = 0.0f;
      for (int64_t i = 0; i < k; ++i) sum += bf16_to_fp32(h[i]) * x[i];
      return sum;
    }
    case RowFormat::kQ4_Z128:
      return dot_row_q4_z128(row, x, k);
    case RowFormat::kQ8_0:
    case RowFormat::kQ4_0:
    case RowFormat::kQ4_1:
    case RowFormat::kQ5_0:
    case RowFormat::kQ5_1:
    case RowFormat::kQ4_K:
    case RowFormat::kQ5_K:
    case RowFormat::kQ6_K:
    case RowFormat::kQ2_K:
    case RowFormat::kQ3_K:
    case RowFormat::kIQ4_NL:
    case RowFormat::kIQ4_XS:
    case RowFormat::kNF4:
    case RowFormat::kFP4: {
      const auto* bytes = static_cast<const uint8_t*>(row);
      const RowFormatInfo& info = row_format_info(format);
      float block[256];  // the largest block (K-quant super-block)
      float sum = 0.0f;
      for (int64_t b = 0; b < k / info.block_size; ++b) {
        dequantize_quant_block(format, bytes + b * info.block_bytes, block);
        sum += dot_f32(block, x + b * info.block_size, info.block_size);
      }
      return sum;
    }
  }
  return 0.0f;
}

void gemm_tile(const float* x, int64_t ldx, int64_t m, const float* w, int64_t ldw, int64_t n,
               int64_t k, float* y, int64_t ldy) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) y[i * ldy + j] = dot_f32(x + i * ldx, w + j * ldw, k);
  }
}

// One row at a time in plain C++ (the reference the vector widths are tested against).
void attend_rows(const float* const* q_rows, float* const* out_rows, const int64_t* num_positions,
                 int64_t num_rows, const float* k, const float* v, const int64_t* offsets,
                 int64_t head_dim, float scale, float* scratch) {
  for (int64_t r = 0; r < num_rows; ++r) {
    attention_rows::attend<lanes::Scalar>(q_rows + r, out_rows + r, num_positions + r, 1, k, v,
                                          offsets, head_dim, scale, scratch);
  }
}

void attend_rows_softcapped(const float* const* q_rows, float* const* out_rows,
                            const int64_t* num_positions, int64_t num_rows, const float* k,
                            const float* v, const int64_t* offsets, int64_t head_dim, float scale,
                            float softcap, float* scratch) {
  for (int64_t r = 0; r < num_rows; ++r) {
    attention_rows::attend<lanes::Scalar, true>(q_rows + r, out_rows + r, num_positions + r, 1, k,
                                                v, offsets, head_dim, scale, scratch, softcap);
  }
}

// torch's CPU formula, x / (1 + exp(-x)), with libm's exp: the reference for the vector
// versions.
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

// torch's CPU formula for gelu(x, approximate="tanh"), 0.5 * x * (1 + tanh(sqrt(2 / pi) *
// (x + 0.044715 * x^3))), with libm's tanh: the reference for the vector versions.
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
  constexpr float kKappa = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    const float inner = kBeta * (x + kKappa * x * x * x);
    out[i] = 0.5f * x * (1.0f + std::tanh(inner)) * up[i];
  }
}

// libm's exp, summed in order in a double: the reference for the vector versions.
double sum_exp(const float* x, int64_t n, float shift) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += std::exp(x[i] - shift);
  return total;
}

// The sampler's scans one value at a time: the reference for the vector versions.
void sanitize_scores(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) {
      x[i] = -std::numeric_limits<float>::infinity();
    } else if (x[i] > std::numeric_limits<float>::max()) {
      x[i] = std::numeric_limits<float>::max();
    }
  }
}

int64_t first_max(const float* x, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  int64_t at = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > max) {
      max = x[i];
      at = i;
    }
  }
  return at;
}

}  // namespace

const IsaKernels& scalar_kernels() {
  static constexpr IsaKernels kKernels{.dot_f32 = dot_f32,
                                       .axpy_f32 = axpy_f32,
                                       .scale_f32 = scale_f32,
                                       .dequantize_row = dequantize_row,
                                       .dot_row = dot_row,
                                       .gemm_tile = gemm_tile,
                                       .gemm_panel = nullptr,
                                       .silu_mul = silu_mul,
                                       .gelu_tanh_mul = gelu_tanh_mul,
                                       .sum_exp = sum_exp,
                                       .sanitize_scores = sanitize_scores,
                                       .first_max = first_max,
                                       .quantize_row_q8_act = quantize_row_q8_act_scalar,
                                       .dot_row_q8 = dot_row_q8_scalar,
                                       .dot_rows_q8 = dot_rows_q8_scalar,
                                       .int8_tile_row_bytes = nullptr,
                                       .int8_tile_prepare = nullptr,
                                       .int8_tile_gemm = nullptr,
                                       .attend_rows = attend_rows,
                                       .attend_rows_softcapped = attend_rows_softcapped,
                                       .panel16_dot = panel16_dot_scalar,
                                       .panel16_unpack = panel16_unpack_scalar,
                                       .panel16_gemm = panel16_gemm_scalar,
                                       .panel16_direct_gemm = panel16_dot_scalar,
                                       .fp8_panel_dot = fp8_panel_dot_scalar,
                                       .fp8_panel_unpack = fp8_panel_unpack_scalar,
                                       .bf16_pairs_of = bf16_pairs_of};
  return kKernels;
}

}  // namespace lm::kernels
