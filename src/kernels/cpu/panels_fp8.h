// FP8 weights (E4M3FN, E5M2) in panels: panels16.h's layout (kPanel16Rows rows stored k-major)
// with one byte a value, and a scale per lane (row) and block of columns. Each weight is its value
// times its scale in fp32 (the product rounded once), as TGI's and vLLM's FP8 kernels apply the
// scales in fp32; transformers on a CPU, which dequantizes FP8 checkpoints into bf16, holds these
// weights rounded to bf16.
// NOTE: as for 16-bit panels, every output is one fp32 FMA chain over k in order with the same
// weight values in every kernel (decode streams the bytes, prefill unpacks them once per tile into
// fp32 panels for panel16_gemm), so a row's result is the same bits alone or in any batch, and at
// every ISA level. The layout, packing and scalar references are here; the vector kernels are
// lanes/panels_fp8.h.
#pragma once

#include <cstdint>

#include "kernels/cpu/panels16.h"

namespace lm::kernels {

enum class Fp8Format : uint8_t { kE4M3, kE5M2 };

struct Fp8Panels {
  Fp8Format format = Fp8Format::kE4M3;
  const uint8_t* values = nullptr;  // num_panels panels of k * kPanel16Rows bytes
  // [num_panels][num_blocks][kPanel16Rows]: panel g's lane c in column block b (columns
  // [b * block_cols, (b + 1) * block_cols)); for E4M3 the scale times 2^8 (fp8_as_fp16_bits).
  const float* lane_scales = nullptr;
  int64_t block_cols = 0;
  int64_t num_blocks = 1;  // ceil(k / block_cols)
};

// An FP8 byte as fp32 up to the format's constant factor: E5M2 is the top byte of an fp16
// (factor 1); E4M3FN's bits read at an fp16's exponent and mantissa places are its value / 2^8,
// subnormals included (its NaN, 0x7f, must not occur). Exact.
uint16_t fp8_as_fp16_bits(uint8_t b, Fp8Format format);

// Lane scales from a grid of scales [ceil(n / block_rows)][grid_cols] (each covering block_rows
// rows x block_cols columns): dst [n / kPanel16Rows][grid_cols][kPanel16Rows], E4M3's times 2^8
// (exact: a power of two).
void fp8_lane_scales(const float* grid, int64_t block_rows, int64_t grid_cols, int64_t n,
                     Fp8Format format, float* dst);

// n rows of k bytes (row j at src + j * k) into panels at dst (n a multiple of kPanel16Rows).
void pack_fp8_panels(const uint8_t* src, int64_t n, int64_t k, uint8_t* dst);

// Weight (p, c) of panel g (k columns) as the kernels use it.
float fp8_panel_weight(const Fp8Panels& w, int64_t k, int64_t g, int64_t p, int64_t c);

// The scalar references (their contracts are IsaKernels'):
void fp8_panel_dot_scalar(const Fp8Panels& w, int64_t g0, int64_t num_panels, int64_t k,
                          const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy);
void fp8_panel_unpack_scalar(const Fp8Panels& w, int64_t g, int64_t k, int64_t p0, int64_t p1,
                             float* dst);

}  // namespace lm::kernels
