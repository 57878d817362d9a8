// Instruction-set variants of the CPU kernels: which ones this machine runs (CPUID and the
// register state the OS enables), the one this process uses (the best, or a start-time cap), and
// the table of per-ISA inner loops every kernel dispatches through.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace lm::kernels {

// The levels, lowest first. kAvxVnni: AVX2 + 256-bit vpdpbusd, from AVX-VNNI (Alder Lake and
// later client CPUs, Sierra Forest, Zen 5) or from AVX512-VNNI + VL (an AVX-512 CPU capped there).
// kAvx512Vnni: AVX-512 F/BW/VL + VNNI integer dots. kAvx512Bf16: those + AVX512_BF16's bf16 pair
// dots (vdpbf16ps; Cooper Lake, Sapphire Rapids and later Xeons, AMD Zen 4 and later). Each level
// includes the ones before it, except that kAvx512 does not include kAvxVnni: Skylake-SP runs
// AVX-512 without any VNNI, Alder Lake AVX-VNNI without AVX-512 (isa_supported asks about each
// level on its own; the AVX-512 tables start from AVX2's).
enum class Isa { kScalar, kAvx2, kAvxVnni, kAvx512, kAvx512Vnni, kAvx512Bf16 };

// Every level, lowest first.
inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2,       Isa::kAvxVnni,
                                   Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAvx512Bf16};

// The CPUID words and XCR0 the decision reads, as plain values (read_cpu_id() on this machine;
// tests build synthetic ones).
struct CpuId {
  uint32_t leaf1_ecx = 0;    // FMA (12), OSXSAVE (27), AVX (28), F16C (29)
  uint32_t leaf7_ebx = 0;    // AVX2 (5), AVX512F (16), AVX512BW (30), AVX512VL (31)
  uint32_t leaf7_ecx = 0;    // AVX512_VNNI (11)
  uint32_t leaf7_1_eax = 0;  // CPUID 7 sub-leaf 1: AVX-VNNI (4), AVX512_BF16 (5)
  uint64_t xcr0 = 0;         // XGETBV(0), 0 without OSXSAVE: the register state the OS saves
};

CpuId read_cpu_id();
// Whether `id` runs `isa`: the CPU must advertise the instructions AND the OS must enable their
// register state in XCR0 (bits 1-2, SSE/AVX, for AVX2; bits 5-7, opmask/ZMM, for AVX-512), or
// the first vector instruction faults. Pure functions of their argument.
bool level_runs(const CpuId& id, Isa isa);
// The highest level `id` runs.
Isa detect_isa(const CpuId& id);
// Whether `id` has AVX-VNNI's VEX vpdpbusd (else kAvxVnni runs the EVEX one of AVX512-VNNI + VL).
bool has_avx_vnni_vex(const CpuId& id);
// Why `id` stops below a level it advertises (e.g. the OS does not enable the ZMM state), or
// empty when it does not.
std::string isa_limit_reason(const CpuId& id);

// This machine: level_runs(read_cpu_id(), isa), read once.
bool isa_supported(Isa isa);
Isa detected_isa();

// The level the kernels use when not told otherwise: detected_isa(), or the cap given to
// select_isa. Fixed by its first read (the kernels' defaults, model loading).
Isa best_isa();
// Caps best_isa() at `cap` (--cpu-isa): one call at start, before any kernel runs. An error,
// saying what this CPU runs, when the CPU does not run `cap` (isa_supported).
Status select_isa(Isa cap);

const char* isa_name(Isa isa);
// "scalar", "avx2", "avx-vnni", "avx512", "avx512-vnni", "avx512-bf16" (isa_name's spellings).
std::optional<Isa> parse_isa(std::string_view name);

// Columns of a gemm_panel panel (one 512-bit register of fp32).
inline constexpr int64_t kPanelWidth = 16;

enum class RowFormat;
enum class KvFormat;
struct BlockQ8Act;
struct Fp8Panels;

// Inner loops one ISA provides. The scalar table is the reference the others are tested against.
struct IsaKernels {
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  // y[i] += a * x[i]
  void (*axpy_f32)(float a, const float* x, float* y, int64_t n);
  // y[i] *= a
  void (*scale_f32)(float a, float* y, int64_t n);
  void (*dequantize_row)(RowFormat format, const void* src, float* dst, int64_t k);
  float (*dot_row)(RowFormat format, const void* row, const float* x, int64_t k);
  // y[i * ldy + j] = dot(x + i * ldx, w + j * ldw) over k, for i < m, j < n: a small GEMM tile
  // on fp32 rows that are already hot in cache.
  void (*gemm_tile)(const float* x, int64_t ldx, int64_t m, const float* w, int64_t ldw, int64_t n,
                    int64_t k, float* y, int64_t ldy);
  // y[i * ldy + c] = dot(x + i * ldx, column c of `panels`) for i < m, c < nc (<= 2 x
  // kPanelWidth): a GEMM against weight rows stored k-major in panels of kPanelWidth
  // (panels[(q * k + p) * kPanelWidth + c] is column q * kPanelWidth + c), so each step is
  // broadcast-x times a row of a panel and no horizontal sums remain. Null in tables without it
  // (then matmul uses gemm_tile).
  void (*gemm_panel)(const float* x, int64_t ldx, int64_t m, const float* panels, int64_t nc,
                     int64_t k, float* y, int64_t ldy);
  // out[i] = silu(gate[i]) * up[i] (activations.h).
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  // out[i] = gelu_tanh(gate[i]) * up[i] (activations.h).
  void (*gelu_tanh_mul)(const float* gate, const float* up, float* out, int64_t n);
  // sum over i < n of exp(x[i] - shift), every x[i] <= shift (activations.h).
  double (*sum_exp)(const float* x, int64_t n, float shift);
  // NaN to -inf and +inf to the largest float, in place; the lowest index holding the largest
  // non-NaN value above -inf, or -1 (activations.h: a row of logits, once per sampled token).
  void (*sanitize_scores)(float* x, int64_t n);
  int64_t (*first_max)(const float* x, int64_t n);
  // The int8 activation path (int8_dot.h): quantize an fp32 row to int8 blocks, and the integer
  // dot of a GGML block-format row with such a row.
  void (*quantize_row_q8_act)(const float* x, BlockQ8Act* dst, int64_t k);
  float (*dot_row_q8)(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t k);
  // out[i * out_stride] = dot_row_q8(row, xq + i * xq_stride) for i < m: one weight row against
  // m activation rows, each weight block unpacked once per group of rows (batched decode).
  void (*dot_rows_q8)(RowFormat format, const void* row, const BlockQ8Act* xq, int64_t xq_stride,
                      int64_t m, int64_t k, float* out, int64_t out_stride);
  // The register-tiled int8 GEMM (int8_tiles.h), where an ISA has one: prepared-row bytes (0 when
  // the format / k is not tiled; then matmul uses dot_rows_q8), preparation and the GEMM. Null in
  // tables without it.
  int64_t (*int8_tile_row_bytes)(RowFormat format, int64_t k);
  void (*int8_tile_prepare)(RowFormat format, const BlockQ8Act* xq, int64_t xq_stride, int64_t m,
                            int64_t k, void* dst);
  void (*int8_tile_gemm)(RowFormat format, const void* w, int64_t w_row_bytes, int64_t n,
                         const void* x, int64_t m, int64_t k, float* y, int64_t ldy);
  // Up to kAttentionMaxRows query rows that read the same K/V rows attend together, one row per
  // vector lane (attention_rows.h): row r attends to positions [0, num_positions[r]) at
  // k + offsets[p] / v + offsets[p]. scratch: attention_rows::scratch_floats(head_dim) floats.
  void (*attend_rows)(const float* const* q_rows, float* const* out_rows,
                      const int64_t* num_positions, int64_t num_rows, const float* k,
                      const float* v, const int64_t* offsets, int64_t head_dim, float scale,
                      float* scratch);
  // attend_rows with soft-capped scores: softcap * tanh(score / softcap) (Gemma 2).
  void (*attend_rows_softcapped)(const float* const* q_rows, float* const* out_rows,
                                 const int64_t* num_positions, int64_t num_rows, const float* k,
                                 const float* v, const int64_t* offsets, int64_t head_dim,
                                 float scale, float softcap, float* scratch) = nullptr;
  // Decode attention for 1-4 rows with head_dim a multiple of 8, split over threads with the
  // bits of attend_rows (attention_rows.h: scores_in_lanes / values_in_lanes): the scores of a
  // range of positions, then the softmax and the V sums of a range of head dims, K/V read in
  // place from a cache in `format` (kv_format.h), each element converted to fp32 as it is loaded.
  // Null in tables without them.
  void (*attend_scores)(KvFormat format, const float* const* q_rows, const int64_t* num_positions,
                        int64_t num_rows, const void* k, const int64_t* offsets, int64_t head_dim,
                        float scale, int64_t p_begin, int64_t p_end, float* scores,
                        int64_t stride) = nullptr;
  void (*attend_values)(KvFormat format, const float* scores, int64_t stride,
                        const int64_t* num_positions, int64_t num_rows, const void* v,
                        const int64_t* offsets, int64_t head_dim, int64_t d_begin, int64_t d_end,
                        float* const* out_rows, float* scratch) = nullptr;
  // dst[i] = src[i] as fp32 for i < n, src in `format` (kv_format.h: decode_kv_row's vector
  // path, the element policies of attention_rows.h). Null in tables without it.
  void (*decode_kv)(KvFormat format, const void* src, float* dst, int64_t n) = nullptr;
  // encode_kv_row's bytes (kv_format.h: F16 rows clamped to its finite range, rounded to nearest
  // even) from vector conversions; null in tables without it.
  void (*encode_kv)(KvFormat format, const float* src, void* dst, int64_t n) = nullptr;
  // attend_rows' decode kernel (1-8 rows, head_dim a multiple of 8) reading K/V in place from a
  // cache in `format`, as attend_scores / attend_values do: the bits of the fp32 kernel on the
  // decoded rows, without decoding them into scratch first. Null in tables without it.
  void (*attend_rows_kv)(KvFormat format, const float* const* q_rows, float* const* out_rows,
                         const int64_t* num_positions, int64_t num_rows, const void* k,
                         const void* v, const int64_t* offsets, int64_t head_dim, float scale,
                         float* scratch) = nullptr;
  // The int8 GEMM over interleaved weight rows (int8_interleaved.h), where an ISA has one:
  // activation preparation and the GEMM. Null in tables without it (then weights stay in rows).
  void (*int8_interleaved_prepare)(const BlockQ8Act* xq, int64_t xq_stride, int64_t m, int64_t k,
                                   void* dst) = nullptr;
  void (*int8_interleaved_gemm)(RowFormat format, const void* w, int64_t n, const void* x,
                                int64_t m, int64_t k, float* y, int64_t ldy) = nullptr;
  // 16-bit weights (F16, BF16) in panels of 16 rows (panels16.h), every output one fp32 FMA
  // chain over k in order. panel16_dot: y[i * ldy + 16 g + c] = dot(x + i * ldx, row c of panel
  // g) for i < m, g < num_panels, straight from the 16-bit values (decode). panel16_unpack:
  // dst[(p - p0) * 16 + c] = a panel's (p, c) as fp32 for p in [p0, p1). panel16_gemm: y[i * ldy
  // + 16 g + c] = the chain over k of x + i * ldx against unpacked panel g (num_panels of them,
  // k * 16 values each, one after another), continuing from y's values when `accumulate`
  // (prefill, over blocks of k).
  void (*panel16_dot)(RowFormat format, const void* panels, int64_t num_panels, int64_t k,
                      const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy) = nullptr;
  void (*panel16_unpack)(RowFormat format, const void* panel, int64_t p0, int64_t p1,
                         float* dst) = nullptr;
  void (*panel16_gemm)(const float* x, int64_t ldx, int64_t m, const float* panels,
                       int64_t num_panels, int64_t k, float* y, int64_t ldy,
                       bool accumulate) = nullptr;
  // panel16_direct_gemm: panel16_dot's product in prefill's register tiles, converting the 16-bit
  // values at every step instead of unpacking them. Prefill of up to panel16_direct_max_rows rows
  // runs it (the conversions issue beside the FMAs, and no unpacked panel is written and read
  // again); more rows unpack and run panel16_gemm (0: never, the scalar table). Decode's few rows
  // run panel16_dot whatever this says.
  void (*panel16_direct_gemm)(RowFormat format, const void* panels, int64_t num_panels, int64_t k,
                              const float* x, int64_t ldx, int64_t m, float* y,
                              int64_t ldy) = nullptr;
  int64_t panel16_direct_max_rows = 0;
  // FP8 weights in panels (panels_fp8.h): the weights fp8_panel_weight gives, every output one
  // fp32 FMA chain over k in order. fp8_panel_dot: y[i * ldy + 16 (g - g0) + c] = dot(x + i * ldx,
  // row c of panel g) for i < m, g in [g0, g0 + num_panels) (decode). fp8_panel_unpack:
  // dst[(p - p0) * 16 + c] = panel g's weight (p, c) for p in [p0, p1) (prefill: the fp32 panels
  // panel16_gemm runs).
  void (*fp8_panel_dot)(const Fp8Panels& w, int64_t g0, int64_t num_panels, int64_t k,
                        const float* x, int64_t ldx, int64_t m, float* y, int64_t ldy) = nullptr;
  void (*fp8_panel_unpack)(const Fp8Panels& w, int64_t g, int64_t k, int64_t p0, int64_t p1,
                           float* dst) = nullptr;
  // BF16 weights in pair panels against bf16 activation pairs (bf16_pairs.h), every output one
  // chain of bf16 pair dots over k in order: y[i * ldy + 16 g + c] (+)= the chain over pairs
  // [q0, q1) of x + i * ldx (pairs, bf16_pairs_of) against row c of panel g (num_panels of them,
  // k values each), continuing from y's values when `accumulate`. Null in tables without it.
  void (*bf16_pair_gemm)(const uint32_t* x, int64_t ldx, int64_t m, const void* panels,
                         int64_t num_panels, int64_t k, int64_t q0, int64_t q1, float* y,
                         int64_t ldy, bool accumulate) = nullptr;
  // bf16_pairs_of: the activation rows bf16_pair_gemm reads (bf16_pairs.h), the same bits.
  void (*bf16_pairs_of)(const float* x, int64_t k, uint32_t* dst) = nullptr;
};

// LM_CHECKs that the ISA is supported.
const IsaKernels& isa_kernels(Isa isa);

// The scalar reference table, and what each vector ISA adds to the table of the ISA below it
// (isa.cc assembles them; the ops written once against the lane policies are lanes/lane_kernels.h).
const IsaKernels& scalar_kernels();
// AVX2's row formats and int8 dots.
void add_avx2_kernels(IsaKernels& kernels);
// The VNNI (vpdpbusd) int8 dots, tiles and interleaved GEMM.
void add_avx512_vnni_kernels(IsaKernels& kernels);
// AVX-512F's dot_row for bitsandbytes' NF4 / FP4 (the table's previous dot_row for the rest).
void add_avx512_bnb4_kernels(IsaKernels& kernels);
// AVX512_BF16's pair-dot GEMM for BF16 weights (bf16_pairs.h).
void add_avx512_bf16_kernels(IsaKernels& kernels);

}  // namespace lm::kernels
