// The register-tiled int8 GEMM of the AVX-512 VNNI table (int8_tiles_vnni.cc): up to 4 weight rows
// against 4 activation rows per tile, 64 activations per 512-bit vpdpbusd. The activation rows,
// already quantized to BlockQ8Act, are first "prepared" into the byte order the weight unpack
// produces, with each lane's scale and its zero-point / minimum correction precomputed, so a
// weight block is unpacked once per 4 activation rows and a (weight row, activation row) pair costs
// four instructions per 64 products. Every pair is summed in the same order whatever the tile
// shape, so a row's result does not depend on the batch it is in.
#pragma once

#include <cstdint>

#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {

// Bytes of one prepared activation row of k elements for weights in `format`, or 0 when the tiled
// kernel does not take this format / k (then dot_rows_q8 is the path): Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K and Q6_K with k a multiple of 64.
int64_t int8_tile_row_bytes_vnni(RowFormat format, int64_t k);

// dst (64-byte aligned, m * int8_tile_row_bytes_vnni(format, k) bytes) = the m rows of xq
// (xq_stride blocks apart) prepared for `format`.
void int8_tile_prepare_vnni(RowFormat format, const BlockQ8Act* xq, int64_t xq_stride, int64_t m,
                            int64_t k, void* dst);

// y[i * ldy + j] = dot(weight row j, activation row i) for i < m, j < n; weight row j at
// w + j * w_row_bytes; x = m rows prepared by int8_tile_prepare_vnni for the same format and k.
void int8_tile_gemm_vnni(RowFormat format, const void* w, int64_t w_row_bytes, int64_t n,
                         const void* x, int64_t m, int64_t k, float* y, int64_t ldy);

}  // namespace lm::kernels
