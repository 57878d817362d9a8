// Matmul: for one activation row (decode) a dot per weight row straight from the packed format;
// for several rows (prefill) each weight tile is converted to fp32 once per block of X rows and
// reused by a register-tiled GEMM, so quantized prefill costs about as much as fp32 prefill (16-bit
// panels, where the ISA's table says so, convert in the GEMM's registers instead:
// panel16_direct_gemm).
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/check.h"
#include "base/owned_ranges.h"
#include "kernels/cpu/bf16_pairs.h"
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/int8_interleaved.h"
#include "kernels/cpu/interleaved_rows.h"
#include "kernels/cpu/panels16.h"
#include "kernels/cpu/panels_fp8.h"

namespace lm::kernels {
namespace {

// Weight rows converted to fp32 at a time (16 rows of k = 4096 is 256 KiB of scratch).
constexpr int64_t kTileRows = 16;
// Calls with fewer activation rows than this are decode: their threads split the weight rows in
// small pieces with OwnedRanges, so a thread that starts late (a worker woken from sleep) leaves
// its last pieces to the others instead of holding the call up. Prefill pieces are larger or one
// range per thread, since each piece sweeps all the activation rows again.
constexpr int64_t kDecodeMaxRows = 8;
// Groups of 8 interleaved rows per piece in the interleaved GEMM: 4 groups of a 4096-wide Q4_0
// matrix are 74 KB, a few microseconds; at m = 512, 4 groups ran 10% slower than 16.
constexpr int64_t kDecodePieceGroups = 4;
constexpr int64_t kPrefillPieceGroups = 16;
// Bytes of X rows kept hot while a weight tile sweeps over them.
constexpr int64_t kXBlockBytes = 256 * 1024;
// 16-bit panels: a decode piece is kPanel16DecodePanels (panels16.h), the panels its GEMV
// streams side by side. The prefill block: kPanelDepth values of k of two
// panels as fp32 (128 KiB, in L2) against kPanelBlockRows X rows, which each register tile streams
// (14 rows x 4 KiB; every x value loaded feeds 32 FMAs). Deep blocks, because each depth block
// reads and writes the block's Y again. One 4096 x 4096 F16 Linear against 512 rows, 2 threads,
// X rows padded: 256 x 512 (two panels' depth in L1) ran 193 GFLOP/s at avx512 and 179 at avx2,
// 1024 x 512 215 and 207 (2048 x 256: 211 / 212, but 147 against 185 for 64 rows at avx2).
constexpr int64_t kPanelDepth = 1024;
constexpr int64_t kPanelBlockRows = 512;
// Panels converted together for one prefill GEMM call: two, so a tile can span 32 columns where
// the ISA has the registers for it.
constexpr int64_t kPrefillPanels = 2;
// BF16 pair panels' prefill blocking: kPairDepth pairs of k (two panels' 2048 pairs are 256 KiB
// of bf16, read from L2 at 128 bytes per 28 pair dots) against kPairBlockRows X rows. Deep blocks,
// because every depth block reads and writes the block's Y again: at 7B shapes 128 pairs x 512
// rows (the fp32 panels' 16 KiB L1 tile) moved as many bytes of Y as of weights and ran pp512 /
// pp64 at 81-93 / 87-97 tokens/s where 2048 x 128 runs 103-109 / 96-112 (1024 x 256: 105 / 98-102;
// the 8-layer Llama-2-7B-shaped BF16 file, 2 threads, 3 alternating rounds).
constexpr int64_t kPairDepth = 2048;
constexpr int64_t kPairBlockRows = 128;

// fn(begin, end) for pieces of at most `piece` indices of [0, n), over the pool's threads as
// OwnedRanges splits them.
template <typename Fn>
void for_owned_pieces(ThreadPool& pool, int64_t n, int64_t piece, const Fn& fn) {
  const int threads =
      static_cast<int>(std::min<int64_t>(pool.num_threads(), (n + piece - 1) / piece));
  OwnedRanges ranges(n, threads, piece);
  pool.parallel_for(threads, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t p0 = 0, p1 = 0;
      while (ranges.claim(static_cast<int>(t), &p0, &p1)) fn(p0, p1);
    }
  });
}

// fn(begin, end) over W rows [0, n) in multiples of kTileRows: pieces of kTileRows rows for
// decode, one contiguous range per thread for prefill.
template <typename Fn>
void for_weight_rows(ThreadPool& pool, int64_t m, int64_t n, const Fn& fn) {
  if (m >= kDecodeMaxRows) {
    pool.parallel_for(n, fn, kTileRows);
    return;
  }
  for_owned_pieces(pool, (n + kTileRows - 1) / kTileRows, 1, [&](int64_t p0, int64_t p1) {
    fn(p0 * kTileRows, std::min(n, p1 * kTileRows));
  });
}

// The first 64-byte boundary at or after p (p has room for kPanelWidth floats more).
float* align_up_64(float* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<float*>((address + 63) & ~uintptr_t{63});
}

// X rows as a prefill GEMM reads them: x itself, or a copy whose rows are an odd number of cache
// lines apart where x's rows alias. Rows of k floats a multiple of 16 lines apart (k a multiple of
// 256) fall in at most 4 of L1's 64 sets however many a register tile reads from: at k = 4096 a
// row is 16 KiB, so the 14 rows a panel tile broadcasts from all fell in one set (8 ways) and a
// block's rows in an eighth of L2's sets (4096 x 4096 F16 against 512 rows, 2 threads, avx512:
// 144 -> 193 GFLOP/s). The copy is the calling thread's buffer, read by the workers through the
// pointer, and valid until its next call.
struct XRows {
  const float* x;
  int64_t ldx;
};
XRows unaliased_rows(const float* x, int64_t m, int64_t k, ThreadPool& pool) {
  if (k % 256 != 0) return {x, k};
  const int64_t ldx = (k / 16 + 1) * 16;
  thread_local std::vector<float> storage;
  storage.resize(static_cast<size_t>(m * ldx + 16));
  float* const copy = align_up_64(storage.data());
  pool.parallel_for(m, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) std::copy_n(x + i * k, k, copy + i * ldx);
  });
  return {copy, ldx};
}

// y[i * n + j] += bias[j] for i < m, j in [j0, j1) (nothing without a bias).
void add_bias_columns(const float* bias, float* y, int64_t m, int64_t n, int64_t j0, int64_t j1) {
  if (bias == nullptr) return;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = j0; j < j1; ++j) y[i * n + j] += bias[j];
  }
}

// Float prefill where the ISA has gemm_panel: each thread converts two panels' worth of weight
// rows (2 x kPanelWidth) at a time to fp32 and stores them k-major (two panels), then runs every
// X row against them, so each weight row is converted once per call and the GEMM needs no
// horizontal sums; two panels let each x value loaded feed two FMAs.
void matmul_panels(RowFormat format, const uint8_t* w_bytes, int64_t w_row_bytes, const float* x,
                   float* y, int64_t m, int64_t n, int64_t k, ThreadPool& pool, const float* bias,
                   const IsaKernels& kernels) {
  constexpr int64_t kPairRows = 2 * kPanelWidth;
  const XRows rows_x = unaliased_rows(x, m, k, pool);
  pool.parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> rows, panel_storage;
        rows.resize(static_cast<size_t>(kPairRows * k));
        // NOTE: the panels start on a 64-byte line, so each of gemm_panel's 16-float loads reads
        // one cache line: from wherever malloc put them, every load could straddle two, and the
        // same code ran up to ~9% apart between two builds (SmolLM2 F16 prefill).
        panel_storage.resize(static_cast<size_t>(kPairRows * k + kPanelWidth));
        float* panels = align_up_64(panel_storage.data());
        for (int64_t n0 = begin; n0 < end; n0 += kPairRows) {
          const int64_t nt = std::min(kPairRows, end - n0);
          const int64_t num_panels = (nt + kPanelWidth - 1) / kPanelWidth;
          for (int64_t r = 0; r < nt; ++r)
            kernels.dequantize_row(format, w_bytes + (n0 + r) * w_row_bytes, rows.data() + r * k,
                                   k);
          // Rows past nt are zeros, so each panel step is a plain gather of kPanelWidth values,
          // unrolled: a straight run of loads and stores with no inner loop or branch.
          std::fill(rows.begin() + nt * k, rows.begin() + num_panels * kPanelWidth * k, 0.0f);
          for (int64_t q = 0; q < num_panels; ++q) {
            const float* panel_rows = rows.data() + q * kPanelWidth * k;
            float* panel = panels + q * kPanelWidth * k;
            for (int64_t p = 0; p < k; ++p) {
              float* column = panel + p * kPanelWidth;
#pragma GCC unroll 16
              for (int64_t r = 0; r < kPanelWidth; ++r) column[r] = panel_rows[r * k + p];
            }
          }
          kernels.gemm_panel(rows_x.x, rows_x.ldx, m, panels, nt, k, y + n0, n);
        }
        if (bias) {
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = begin; j < end; ++j) y[i * n + j] += bias[j];
          }
        }
      },
      kPairRows);
}

// The tiled int8 GEMM (int8_tiles.h): the quantized X rows prepared once per call, then each
// thread's share of W rows against blocks of X rows that stay hot in cache.
void matmul_int8_tiled(RowFormat format, const uint8_t* w_bytes, int64_t w_row_bytes,
                       const BlockQ8Act* xq, float* y, int64_t m, int64_t n, int64_t k,
                       int64_t prepared_row_bytes, ThreadPool& pool, const float* bias,
                       const IsaKernels& kernels) {
  struct alignas(64) Line {
    uint8_t bytes[64];
  };
  const int64_t num_blocks = k / kQuantBlockSize;
  thread_local std::vector<Line> prepared;
  prepared.resize(static_cast<size_t>(m * prepared_row_bytes / 64));
  auto* x = reinterpret_cast<uint8_t*>(prepared.data());
  if (m == 1) {
    kernels.int8_tile_prepare(format, xq, num_blocks, 1, k, x);
  } else {
    pool.parallel_for(m, [&](int64_t begin, int64_t end) {
      kernels.int8_tile_prepare(format, xq + begin * num_blocks, num_blocks, end - begin, k,
                                x + begin * prepared_row_bytes);
    });
  }
  const int64_t m_block = std::min(m, std::max<int64_t>(4, kXBlockBytes / prepared_row_bytes));
  for_weight_rows(pool, m, n, [&](int64_t begin, int64_t end) {
    for (int64_t m0 = 0; m0 < m; m0 += m_block) {
      const int64_t m1 = std::min(m, m0 + m_block);
      kernels.int8_tile_gemm(format, w_bytes + begin * w_row_bytes, w_row_bytes, end - begin,
                             x + m0 * prepared_row_bytes, m1 - m0, k, y + m0 * n + begin, n);
    }
    if (bias) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = begin; j < end; ++j) y[i * n + j] += bias[j];
      }
    }
  });
}

// The m rows of X quantized to int8 blocks (k / 32 per row) in a per-thread buffer.
BlockQ8Act* quantize_rows(const float* x, int64_t m, int64_t k, ThreadPool& pool,
                          const IsaKernels& kernels) {
  const int64_t num_blocks = k / kQuantBlockSize;
  thread_local std::vector<BlockQ8Act> xq;
  xq.resize(static_cast<size_t>(m * num_blocks));
  BlockQ8Act* xq_data = xq.data();
  if (m == 1) {
    kernels.quantize_row_q8_act(x, xq_data, k);
  } else {
    pool.parallel_for(m, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        kernels.quantize_row_q8_act(x + i * k, xq_data + i * num_blocks, k);
    });
  }
  return xq_data;
}

// X rows, quantized to int8 blocks, against W: one integer dot per (X row, W row), W rows swept
// once per block of X rows that stays hot in cache (or the tiled GEMM where the ISA has one).
void matmul_int8_quantized(RowFormat format, const uint8_t* w_bytes, int64_t w_row_bytes,
                           const BlockQ8Act* xq_data, float* y, int64_t m, int64_t n, int64_t k,
                           ThreadPool& pool, const float* bias, const IsaKernels& kernels) {
  const int64_t num_blocks = k / kQuantBlockSize;
  if (kernels.int8_tile_row_bytes != nullptr) {
    if (const int64_t row_bytes = kernels.int8_tile_row_bytes(format, k); row_bytes > 0) {
      matmul_int8_tiled(format, w_bytes, w_row_bytes, xq_data, y, m, n, k, row_bytes, pool, bias,
                        kernels);
      return;
    }
  }
  const auto xq_row_bytes =
      static_cast<int64_t>(sizeof(BlockQ8Act)) * std::max<int64_t>(1, num_blocks);
  const int64_t m_block = std::min(m, std::max<int64_t>(8, kXBlockBytes / xq_row_bytes));
  for_weight_rows(pool, m, n, [&](int64_t begin, int64_t end) {
    for (int64_t m0 = 0; m0 < m; m0 += m_block) {
      const int64_t m1 = std::min(m, m0 + m_block);
      for (int64_t j = begin; j < end; ++j) {
        const uint8_t* row = w_bytes + j * w_row_bytes;
        kernels.dot_rows_q8(format, row, xq_data + m0 * num_blocks, num_blocks, m1 - m0, k,
                            y + m0 * n + j, n);
        if (bias) {
          for (int64_t i = m0; i < m1; ++i) y[i * n + j] += bias[j];
        }
      }
    }
  });
}

// X rows quantized to int8 once per call (llama.cpp's Q8 blocks), then matmul_int8_quantized.
void matmul_int8(RowFormat format, const uint8_t* w_bytes, int64_t w_row_bytes, const float* x,
                 float* y, int64_t m, int64_t n, int64_t k, ThreadPool& pool, const float* bias,
                 const IsaKernels& kernels) {
  matmul_int8_quantized(format, w_bytes, w_row_bytes, quantize_rows(x, m, k, pool, kernels), y, m,
                        n, k, pool, bias, kernels);
}

}  // namespace

void matmul_q8_act(RowFormat format, const void* w, int64_t w_row_bytes, const BlockQ8Act* xq,
                   float* y, int64_t m, int64_t n, int64_t k, ThreadPool& pool, const float* bias,
                   Isa isa) {
  LM_CHECK(m >= 0 && n >= 0 && k % kQuantBlockSize == 0 && supports_int8_dot(format));
  LM_CHECK(w_row_bytes >= row_bytes(format, k));
  if (m == 0 || n == 0) return;
  matmul_int8_quantized(format, static_cast<const uint8_t*>(w), w_row_bytes, xq, y, m, n, k, pool,
                        bias, isa_kernels(isa));
}

bool has_interleaved_matmul(Isa isa) {
  return isa_supported(isa) && isa_kernels(isa).int8_interleaved_gemm != nullptr;
}

void InterleavedInput::prepare(const float* x, int64_t m, int64_t k, ThreadPool& pool, Isa isa) {
  LM_CHECK(m >= 0 && k % kQuantBlockSize == 0 && has_interleaved_matmul(isa));
  prepare_quantized(quantize_rows(x, m, k, pool, isa_kernels(isa)), m, k, pool, isa);
}

void InterleavedInput::prepare_quantized(const BlockQ8Act* xq, int64_t m, int64_t k,
                                         ThreadPool& pool, Isa isa) {
  LM_CHECK(m >= 0 && k % kQuantBlockSize == 0 && has_interleaved_matmul(isa));
  const IsaKernels& kernels = isa_kernels(isa);
  const int64_t num_blocks = k / kQuantBlockSize;
  const int64_t prepared_row_bytes = int8_interleaved_row_bytes(k);
  lines_.resize(static_cast<size_t>(m * prepared_row_bytes / 64));
  m_ = m;
  k_ = k;
  auto* px = reinterpret_cast<uint8_t*>(lines_.data());
  if (m == 1) {
    kernels.int8_interleaved_prepare(xq, num_blocks, 1, k, px);
  } else {
    pool.parallel_for(m, [&](int64_t begin, int64_t end) {
      kernels.int8_interleaved_prepare(xq + begin * num_blocks, num_blocks, end - begin, k,
                                       px + begin * prepared_row_bytes);
    });
  }
}

void matmul_interleaved(RowFormat format, const void* w, const float* x, float* y, int64_t m,
                        int64_t n, int64_t k, ThreadPool& pool, const float* bias, Isa isa) {
  thread_local InterleavedInput input;
  input.prepare(x, m, k, pool, isa);
  matmul_interleaved(format, w, input, y, n, pool, bias, isa);
}

void matmul_interleaved(RowFormat format, const void* w, const InterleavedInput& x, float* y,
                        int64_t n, ThreadPool& pool, const float* bias, Isa isa) {
  const InterleavedProduct product{format, w, n, y, bias};
  matmul_interleaved({&product, 1}, x, pool, isa);
}

void matmul_interleaved(std::span<const InterleavedProduct> products, const InterleavedInput& x,
                        ThreadPool& pool, Isa isa) {
  const int64_t m = x.rows(), k = x.k();
  LM_CHECK(has_interleaved_matmul(isa));
  for (const InterleavedProduct& p : products) LM_CHECK(can_interleave(p.format, p.n, k));
  const IsaKernels& kernels = isa_kernels(isa);
  const int64_t prepared_row_bytes = int8_interleaved_row_bytes(k);
  const auto* px = static_cast<const uint8_t*>(x.data());
  const int64_t m_block = std::min(m, std::max<int64_t>(8, kXBlockBytes / prepared_row_bytes));
  // Groups [begin, end) of one product.
  auto groups = [&](const InterleavedProduct& p, int64_t begin, int64_t end) {
    const int64_t group_bytes = kInterleavedRows * row_bytes(p.format, k);
    const int64_t j0 = begin * kInterleavedRows, j1 = end * kInterleavedRows;
    for (int64_t m0 = 0; m0 < m; m0 += m_block) {
      const int64_t m1 = std::min(m, m0 + m_block);
      kernels.int8_interleaved_gemm(
          p.format, static_cast<const uint8_t*>(p.w) + begin * group_bytes, j1 - j0,
          px + m0 * prepared_row_bytes, m1 - m0, k, p.y + m0 * p.n + j0, p.n);
    }
    if (p.bias) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = j0; j < j1; ++j) p.y[i * p.n + j] += p.bias[j];
      }
    }
  };
  // All products' groups, end to end, as one index space [0, total) that each thread streams
  // a contiguous share of, in pieces, taking pieces of the others' shares when its own is done
  // (OwnedRanges): a thread that starts late (a worker woken from sleep) or runs slower takes
  // fewer pieces instead of holding the others up at the end, and q/k/v or gate/up cost one
  // dispatch, not several.
  std::vector<int64_t> first_group;  // of each product, then the total
  first_group.reserve(products.size() + 1);
  int64_t total_groups = 0;
  for (const InterleavedProduct& p : products) {
    first_group.push_back(total_groups);
    total_groups += p.n / kInterleavedRows;
  }
  first_group.push_back(total_groups);
  for_owned_pieces(pool, total_groups,
                   m < kDecodeMaxRows ? kDecodePieceGroups : kPrefillPieceGroups,
                   [&](int64_t g0, int64_t g1) {
                     for (size_t i = 0; i < products.size(); ++i) {
                       const int64_t lo = std::max(g0, first_group[i]);
                       const int64_t hi = std::min(g1, first_group[i + 1]);
                       if (lo < hi) groups(products[i], lo - first_group[i], hi - first_group[i]);
                     }
                   });
}

namespace {

// The product over weights in panels of kPanel16Rows rows (16-bit or FP8), given how a thread's
// panels [g0, g1) are dotted straight from their stored form (decode) and how panel g's values
// [p0, p1) of k are unpacked into fp32 (prefill).
template <typename Dot, typename Unpack>
void matmul_in_panels(int64_t num_panels, const float* x, float* y, int64_t m, int64_t n, int64_t k,
                      ThreadPool& pool, const float* bias, const IsaKernels& kernels,
                      const Dot& dot, const Unpack& unpack) {
  const auto add_bias = [&](int64_t g0, int64_t g1) {
    add_bias_columns(bias, y, m, n, g0 * kPanel16Rows, g1 * kPanel16Rows);
  };
  if (m < kDecodeMaxRows) {
    // Decode: memory bound on W, so each panel is streamed once in its stored form.
    for_owned_pieces(pool, num_panels, kPanel16DecodePanels, [&](int64_t g0, int64_t g1) {
      dot(g0, g1);
      add_bias(g0, g1);
    });
    return;
  }
  // Prefill: each thread's panels, kPrefillPanels at a time and kPanelDepth values of k at a
  // time, converted to fp32 once per block of X rows and run against every row of the block. The
  // chains continue in y from one depth block to the next.
  const XRows rows_x = unaliased_rows(x, m, k, pool);
  pool.parallel_for(num_panels, [&](int64_t g0, int64_t g1) {
    thread_local std::vector<float> storage;
    storage.resize(static_cast<size_t>(kPrefillPanels * kPanelDepth * kPanel16Rows + kPanel16Rows));
    float* panels = align_up_64(storage.data());
    for (int64_t m0 = 0; m0 < m; m0 += kPanelBlockRows) {
      const int64_t mb = std::min(kPanelBlockRows, m - m0);
      for (int64_t p0 = 0; p0 < k; p0 += kPanelDepth) {
        const int64_t p1 = std::min(k, p0 + kPanelDepth);
        for (int64_t g = g0; g < g1; g += kPrefillPanels) {
          const int64_t count = std::min(kPrefillPanels, g1 - g);
          for (int64_t q = 0; q < count; ++q)
            unpack(g + q, p0, p1, panels + q * (p1 - p0) * kPanel16Rows);
          kernels.panel16_gemm(rows_x.x + m0 * rows_x.ldx + p0, rows_x.ldx, mb, panels, count,
                               p1 - p0, y + m0 * n + g * kPanel16Rows, n, p0 > 0);
        }
      }
    }
    add_bias(g0, g1);
  });
}

}  // namespace

void matmul_panels16(RowFormat format, const void* w, const float* x, float* y, int64_t m,
                     int64_t n, int64_t k, ThreadPool& pool, const float* bias, Isa isa) {
  LM_CHECK(m >= 0 && can_panel16(format, n, k));
  const IsaKernels& kernels = isa_kernels(isa);
  const auto* w_bytes = static_cast<const uint8_t*>(w);
  const int64_t panel_bytes = k * kPanel16Rows * 2;
  if (m >= kDecodeMaxRows && m <= kernels.panel16_direct_max_rows) {
    // Prefill straight from the 16-bit panels: each thread's panels against blocks of X rows,
    // over all of k (no depth blocks: nothing unpacked to keep in cache). The row blocks bound
    // only how many rows a panel sweeps before the next (measured at 512, as unpacked).
    const XRows rows_x = unaliased_rows(x, m, k, pool);
    pool.parallel_for(n / kPanel16Rows, [&](int64_t g0, int64_t g1) {
      for (int64_t m0 = 0; m0 < m; m0 += kPanelBlockRows) {
        kernels.panel16_direct_gemm(
            format, w_bytes + g0 * panel_bytes, g1 - g0, k, rows_x.x + m0 * rows_x.ldx, rows_x.ldx,
            std::min(kPanelBlockRows, m - m0), y + m0 * n + g0 * kPanel16Rows, n);
      }
      add_bias_columns(bias, y, m, n, g0 * kPanel16Rows, g1 * kPanel16Rows);
    });
    return;
  }
  matmul_in_panels(
      n / kPanel16Rows, x, y, m, n, k, pool, bias, kernels,
      [&](int64_t g0, int64_t g1) {
        kernels.panel16_dot(format, w_bytes + g0 * panel_bytes, g1 - g0, k, x, k, m,
                            y + g0 * kPanel16Rows, n);
      },
      [&](int64_t g, int64_t p0, int64_t p1, float* dst) {
        kernels.panel16_unpack(format, w_bytes + g * panel_bytes, p0, p1, dst);
      });
}

bool has_bf16_pair_matmul(Isa isa) { return isa_kernels(isa).bf16_pair_gemm != nullptr; }

void matmul_bf16_pairs(const void* w, const float* x, float* y, int64_t m, int64_t n, int64_t k,
                       ThreadPool& pool, const float* bias, Isa isa) {
  LM_CHECK(m >= 0 && can_bf16_pairs(RowFormat::kBF16, n, k));
  const IsaKernels& kernels = isa_kernels(isa);
  LM_CHECK_MSG(kernels.bf16_pair_gemm != nullptr, "this level has no bf16 pair dots");
  const int64_t pairs = k / 2;
  // The calling thread's buffer, read by the workers through a pointer (a thread_local named in
  // their lambdas would be each worker's own).
  // Rows a cache line apart more than their length: at k = 4096 a row is 8 KiB, and the 14 rows a
  // register tile broadcasts from would otherwise all fall in one L1 set (8 ways).
  const int64_t ldx = pairs + 16;
  thread_local std::vector<uint32_t> storage;
  storage.resize(static_cast<size_t>(m * ldx));
  uint32_t* const xb = storage.data();
  if (m < kDecodeMaxRows) {
    for (int64_t i = 0; i < m; ++i) kernels.bf16_pairs_of(x + i * k, k, xb + i * ldx);
  } else {
    pool.parallel_for(m, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) kernels.bf16_pairs_of(x + i * k, k, xb + i * ldx);
    });
  }
  const auto* w_bytes = static_cast<const uint8_t*>(w);
  const int64_t panel_bytes = k * kPanel16Rows * 2;
  const auto add_bias = [&](int64_t g0, int64_t g1) {
    add_bias_columns(bias, y, m, n, g0 * kPanel16Rows, g1 * kPanel16Rows);
  };
  const int64_t num_panels = n / kPanel16Rows;
  if (m < kDecodeMaxRows) {
    // Decode: memory bound on W, each panel streamed once.
    for_owned_pieces(pool, num_panels, kPanel16DecodePanels, [&](int64_t g0, int64_t g1) {
      kernels.bf16_pair_gemm(xb, ldx, m, w_bytes + g0 * panel_bytes, g1 - g0, k, 0, pairs,
                             y + g0 * kPanel16Rows, n, false);
      add_bias(g0, g1);
    });
    return;
  }
  // Prefill: each thread's panels, kPrefillPanels at a time and kPairDepth pairs at a time (read
  // as stored), against every row of a block of kPairBlockRows. The chains continue in y from one
  // depth block to the next.
  pool.parallel_for(num_panels, [&](int64_t g0, int64_t g1) {
    for (int64_t m0 = 0; m0 < m; m0 += kPairBlockRows) {
      const int64_t mb = std::min(kPairBlockRows, m - m0);
      for (int64_t q0 = 0; q0 < pairs; q0 += kPairDepth) {
        const int64_t q1 = std::min(pairs, q0 + kPairDepth);
        for (int64_t g = g0; g < g1; g += kPrefillPanels) {
          kernels.bf16_pair_gemm(xb + m0 * ldx, ldx, mb, w_bytes + g * panel_bytes,
                                 std::min(kPrefillPanels, g1 - g), k, q0, q1,
                                 y + m0 * n + g * kPanel16Rows, n, q0 > 0);
        }
      }
    }
    add_bias(g0, g1);
  });
}

void matmul_fp8_panels(const Fp8Panels& w, const float* x, float* y, int64_t m, int64_t n,
                       int64_t k, ThreadPool& pool, const float* bias, Isa isa) {
  LM_CHECK(m >= 0 && n > 0 && n % kPanel16Rows == 0 && k > 0 && w.block_cols > 0 &&
           w.num_blocks == (k + w.block_cols - 1) / w.block_cols);
  const IsaKernels& kernels = isa_kernels(isa);
  matmul_in_panels(
      n / kPanel16Rows, x, y, m, n, k, pool, bias, kernels,
      [&](int64_t g0, int64_t g1) {
        kernels.fp8_panel_dot(w, g0, g1 - g0, k, x, k, m, y + g0 * kPanel16Rows, n);
      },
      [&](int64_t g, int64_t p0, int64_t p1, float* dst) {
        kernels.fp8_panel_unpack(w, g, k, p0, p1, dst);
      });
}

void matmul(RowFormat format, const void* w, int64_t w_row_bytes, const float* x, float* y,
            int64_t m, int64_t n, int64_t k, ThreadPool& pool, const float* bias, Isa isa,
            bool quantize_activations) {
  LM_CHECK(m >= 0 && n >= 0 && k >= 0);
  LM_CHECK(w_row_bytes >= row_bytes(format, k));
  // Float rows are read as floats / halves, so every row must stay aligned to its element.
  const RowFormatInfo& info = row_format_info(format);
  if (info.block_size == 1) LM_CHECK(w_row_bytes % info.block_bytes == 0);
  // Nothing to compute, so neither W nor X is read (the float prefill path used to convert all n W
  // rows for m == 0: ASan caught it reading past a test's one-row W).
  if (m == 0 || n == 0) return;
  const IsaKernels& kernels = isa_kernels(isa);
  const auto* w_bytes = static_cast<const uint8_t*>(w);
  if (quantize_activations && supports_int8_dot(format)) {
    matmul_int8(format, w_bytes, w_row_bytes, x, y, m, n, k, pool, bias, kernels);
    return;
  }

  if (m == 1) {
    // Decode: memory bound on W, so stream each row once in its packed form.
    for_weight_rows(pool, m, n, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        const float dot = kernels.dot_row(format, w_bytes + j * w_row_bytes, x, k);
        y[j] = bias ? dot + bias[j] : dot;
      }
    });
    return;
  }

  if (kernels.gemm_panel != nullptr) {
    matmul_panels(format, w_bytes, w_row_bytes, x, y, m, n, k, pool, bias, kernels);
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
