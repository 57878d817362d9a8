// Matmul: for one activation row (decode) a dot per weight row straight from the packed format;
// for several rows (prefill) each weight tile is converted to fp32 once per block of X rows and
// reused by a register-tiled GEMM, so quantized prefill costs about as much as fp32 prefill.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <vector>

#include "base/check.h"

namespace lm::kernels {
namespace {

// Weight rows converted to fp32 at a time (16 rows of k = 4096 is 256 KiB of scratch).
constexpr int64_t kTileRows = 16;
// Bytes of X rows kept hot while a weight tile sweeps over them.
constexpr int64_t kXBlockBytes = 256 * 1024;

}  // namespace

void matmul(RowFormat format, const void* w, int64_t w_row_bytes, const float* x, float* y,
            int64_t m, int64_t n, int64_t k, ThreadPool& pool, const float* bias, Isa isa) {
  LM_CHECK(m >= 0 && n >= 0 && k >= 0);
  LM_CHECK(w_row_bytes >= row_bytes(format, k));
  // Float rows are read as floats / halves, so every row must stay aligned to its element.
  const RowFormatInfo& info = row_format_info(format);
  if (info.block_size == 1) LM_CHECK(w_row_bytes % info.block_bytes == 0);
  const IsaKernels& kernels = isa_kernels(isa);
  const auto* w_bytes = static_cast<const uint8_t*>(w);

  if (m == 1) {
    // Decode: memory bound on W, so stream each row once in its packed form.
    pool.parallel_for(
        n,
        [&](int64_t begin, int64_t end) {
          for (int64_t j = begin; j < end; ++j) {
            const float dot = kernels.dot_row(format, w_bytes + j * w_row_bytes, x, k);
            y[j] = bias ? dot + bias[j] : dot;
          }
        },
        kTileRows);
    return;
  }

  // fp32 weights are used in place; everything else is converted to fp32 scratch first.
  const bool direct = format == RowFormat::kF32;
  const int64_t m_block =
      std::min(m, std::max<int64_t>(8, kXBlockBytes / std::max<int64_t>(1, k * 4) / 4 * 4));
  pool.parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        std::vector<float> scratch(direct ? 0 : static_cast<size_t>(kTileRows * k));
        for (int64_t m0 = 0; m0 < m; m0 += m_block) {
          const int64_t mb = std::min(m_block, m - m0);
          for (int64_t n0 = begin; n0 < end; n0 += kTileRows) {
            const int64_t nt = std::min(kTileRows, end - n0);
            const float* tile;
            int64_t ldw;
            if (direct) {
              tile = reinterpret_cast<const float*>(w_bytes + n0 * w_row_bytes);
              ldw = w_row_bytes / static_cast<int64_t>(sizeof(float));
            } else {
              for (int64_t r = 0; r < nt; ++r) {
                kernels.dequantize_row(format, w_bytes + (n0 + r) * w_row_bytes,
                                       scratch.data() + r * k, k);
              }
              tile = scratch.data();
              ldw = k;
            }
            kernels.gemm_tile(x + m0 * k, k, mb, tile, ldw, nt, k, y + m0 * n + n0, n);
          }
        }
        if (bias) {
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = begin; j < end; ++j) y[i * n + j] += bias[j];
          }
        }
      },
      kTileRows);
}

}  // namespace lm::kernels
