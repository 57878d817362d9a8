#include "kernels/cpu/panels_fp8.h"

#include <cmath>

#include "base/check.h"
#include "base/fp16.h"

namespace lm::kernels {

uint16_t fp8_as_fp16_bits(uint8_t b, Fp8Format format) {
  if (format == Fp8Format::kE5M2) return static_cast<uint16_t>(b << 8);
  return static_cast<uint16_t>(((b & 0x80u) << 8) | ((b & 0x7fu) << 7));
}

void fp8_lane_scales(const float* grid, int64_t block_rows, int64_t grid_cols, int64_t n,
                     Fp8Format format, float* dst) {
  LM_CHECK(n % kPanel16Rows == 0 && block_rows > 0 && grid_cols > 0);
  const float factor = format == Fp8Format::kE4M3 ? 256.0f : 1.0f;
  for (int64_t g = 0; g < n / kPanel16Rows; ++g)
    for (int64_t b = 0; b < grid_cols; ++b)
      for (int64_t c = 0; c < kPanel16Rows; ++c) {
        const int64_t row = g * kPanel16Rows + c;
        dst[(g * grid_cols + b) * kPanel16Rows + c] =
            grid[row / block_rows * grid_cols + b] * factor;
      }
}

void pack_fp8_panels(const uint8_t* src, int64_t n, int64_t k, uint8_t* dst) {
  LM_CHECK(n % kPanel16Rows == 0 && k > 0 && src != dst);
  for (int64_t g = 0; g < n / kPanel16Rows; ++g) {
    uint8_t* panel = dst + g * k * kPanel16Rows;
    for (int64_t c = 0; c < kPanel16Rows; ++c) {
      const uint8_t* row = src + (g * kPanel16Rows + c) * k;
      for (int64_t p = 0; p < k; ++p) panel[p * kPanel16Rows + c] = row[p];
    }
  }
}

float fp8_panel_weight(const Fp8Panels& w, int64_t k, int64_t g, int64_t p, int64_t c) {
  const uint8_t b = w.values[(g * k + p) * kPanel16Rows + c];
  const float scale = w.lane_scales[(g * w.num_blocks + p / w.block_cols) * kPanel16Rows + c];
  return fp16_to_fp32(fp8_as_fp16_bits(b, w.format)) * scale;
}

void fp8_panel_dot_scalar(const Fp8Panels& w, int64_t g0, int64_t num_panels, int64_t k,
                          const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy) {
  for (int64_t g = g0; g < g0 + num_panels; ++g) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < kPanel16Rows; ++c) {
        float acc = 0.0f;
        for (int64_t p = 0; p < k; ++p)
          acc = std::fma(x[i * ldx + p], fp8_panel_weight(w, k, g, p, c), acc);
        y[i * ldy + (g - g0) * kPanel16Rows + c] = acc;
      }
    }
  }
}

void fp8_panel_unpack_scalar(const Fp8Panels& w, int64_t g, int64_t k, int64_t p0, int64_t p1,
                             float* dst) {
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t c = 0; c < kPanel16Rows; ++c)
      dst[(p - p0) * kPanel16Rows + c] = fp8_panel_weight(w, k, g, p, c);
}

}  // namespace lm::kernels
