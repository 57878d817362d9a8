#include "kernels/cpu/panels16.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/cpu/panel_rows.h"

namespace lm::kernels {
namespace {

float half_to_f32(RowFormat format, uint16_t h) {
  return format == RowFormat::kF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

}  // namespace

bool can_panel16(RowFormat format, int64_t n, int64_t k) {
  return (format == RowFormat::kF16 || format == RowFormat::kBF16) && n > 0 &&
         n % kPanel16Rows == 0 && k > 0;
}

void pack_panels16(RowFormat format, const void* src, int64_t src_row_bytes, int64_t n, int64_t k,
                   void* dst) {
  LM_CHECK(can_panel16(format, n, k) && src_row_bytes >= 2 * k);
  LM_CHECK(src != dst || src_row_bytes == 2 * k);
  auto* out = static_cast<uint16_t*>(dst);
  for_each_panel_rows(src, src_row_bytes, n, k, [&](int64_t g, const uint16_t* rows) {
    uint16_t* panel = out + g * k * kPanel16Rows;
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t c = 0; c < kPanel16Rows; ++c) panel[p * kPanel16Rows + c] = rows[c * k + p];
    }
  });
}

void panel16_row(RowFormat format, const void* panels, int64_t k, int64_t row, float* dst) {
  const auto* panel =
      static_cast<const uint16_t*>(panels) + (row / kPanel16Rows) * k * kPanel16Rows;
  const int64_t c = row % kPanel16Rows;
  for (int64_t p = 0; p < k; ++p) dst[p] = half_to_f32(format, panel[p * kPanel16Rows + c]);
}

void panel16_dot_scalar(RowFormat format, const void* panels, int64_t num_panels, int64_t k,
                        const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy) {
  const auto* w = static_cast<const uint16_t*>(panels);
  for (int64_t g = 0; g < num_panels; ++g) {
    const uint16_t* panel = w + g * k * kPanel16Rows;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < kPanel16Rows; ++c) {
        float acc = 0.0f;
        for (int64_t p = 0; p < k; ++p)
          acc = std::fma(x[i * ldx + p], half_to_f32(format, panel[p * kPanel16Rows + c]), acc);
        y[i * ldy + g * kPanel16Rows + c] = acc;
      }
    }
  }
}

void panel16_unpack_scalar(RowFormat format, const void* panel, int64_t p0, int64_t p1,
                           float* dst) {
  const auto* src = static_cast<const uint16_t*>(panel);
  for (int64_t e = p0 * kPanel16Rows; e < p1 * kPanel16Rows; ++e)
    dst[e - p0 * kPanel16Rows] = half_to_f32(format, src[e]);
}

void panel16_gemm_scalar(const float* x, int64_t ldx, int64_t m, const float* panels,
                         int64_t num_panels, int64_t k, float* y, int64_t ldy, bool accumulate) {
  for (int64_t g = 0; g < num_panels; ++g) {
    const float* panel = panels + g * k * kPanel16Rows;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < kPanel16Rows; ++c) {
        float& out = y[i * ldy + g * kPanel16Rows + c];
        float acc = accumulate ? out : 0.0f;
        for (int64_t p = 0; p < k; ++p)
          acc = std::fma(x[i * ldx + p], panel[p * kPanel16Rows + c], acc);
        out = acc;
      }
    }
  }
}

}  // namespace lm::kernels
