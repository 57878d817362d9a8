#include "kernels/cpu/bf16_pairs.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/cpu/panel_rows.h"
#include "kernels/cpu/panels16.h"

namespace lm::kernels {
namespace {

// Values per pair step of a panel: two of each of its 16 rows.
constexpr int64_t kStepHalves = 2 * kPanel16Rows;

// bf16 `h` as vdpbf16ps reads it: subnormals as zero of the same sign.
float bf16_operand(uint16_t h) {
  return (h & 0x7f80u) == 0 ? bf16_to_fp32(static_cast<uint16_t>(h & 0x8000u)) : bf16_to_fp32(h);
}

// An fp32 result as vdpbf16ps leaves it: subnormals flushed to zero of the same sign. (The
// accumulator it reads is flushed the same way, and every accumulator here is such a result or
// zero.)
float flush_subnormal(float v) {
  return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
}

}  // namespace

bool can_bf16_pairs(RowFormat format, int64_t n, int64_t k) {
  return format == RowFormat::kBF16 && n > 0 && n % kPanel16Rows == 0 && k > 0 && k % 2 == 0;
}

void pack_bf16_pairs(const void* src, int64_t src_row_bytes, int64_t n, int64_t k, void* dst) {
  LM_CHECK(can_bf16_pairs(RowFormat::kBF16, n, k) && src_row_bytes >= 2 * k);
  LM_CHECK(src != dst || src_row_bytes == 2 * k);
  auto* out = static_cast<uint16_t*>(dst);
  for_each_panel_rows(src, src_row_bytes, n, k, [&](int64_t g, const uint16_t* rows) {
    uint16_t* panel = out + g * k * kPanel16Rows;
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t c = 0; c < kPanel16Rows; ++c)
        panel[(p / 2) * kStepHalves + 2 * c + p % 2] = rows[c * k + p];
    }
  });
}

void bf16_pairs_row(const void* panels, int64_t k, int64_t row, float* dst) {
  const auto* panel =
      static_cast<const uint16_t*>(panels) + (row / kPanel16Rows) * k * kPanel16Rows;
  const int64_t c = row % kPanel16Rows;
  for (int64_t p = 0; p < k; ++p)
    dst[p] = bf16_to_fp32(panel[(p / 2) * kStepHalves + 2 * c + p % 2]);
}

void bf16_pairs_of(const float* x, int64_t k, uint32_t* dst) {
  LM_CHECK(k % 2 == 0);
  for (int64_t q = 0; q < k / 2; ++q) {
    dst[q] = static_cast<uint32_t>(fp32_to_bf16(x[2 * q])) |
             static_cast<uint32_t>(fp32_to_bf16(x[2 * q + 1])) << 16;
  }
}

void bf16_pair_gemm_scalar(const uint32_t* x, int64_t ldx, int64_t m, const void* panels,
                           int64_t num_panels, int64_t k, int64_t q0, int64_t q1, float* y,
                           int64_t ldy, bool accumulate) {
  const auto* w = static_cast<const uint16_t*>(panels);
  for (int64_t g = 0; g < num_panels; ++g) {
    const uint16_t* panel = w + g * k * kPanel16Rows;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < kPanel16Rows; ++c) {
        float& out = y[i * ldy + g * kPanel16Rows + c];
        float acc = accumulate ? flush_subnormal(out) : 0.0f;
        for (int64_t q = q0; q < q1; ++q) {
          const uint32_t xq = x[i * ldx + q];
          const uint16_t* wq = panel + q * kStepHalves + 2 * c;
          // The odd element first, then the even one, each product exact and each sum rounded
          // once: what an FMA computes.
          acc = flush_subnormal(
              std::fma(bf16_operand(static_cast<uint16_t>(xq >> 16)), bf16_operand(wq[1]), acc));
          acc = flush_subnormal(std::fma(bf16_operand(static_cast<uint16_t>(xq & 0xffffu)),
                                         bf16_operand(wq[0]), acc));
        }
        out = acc;
      }
    }
  }
}

}  // namespace lm::kernels
