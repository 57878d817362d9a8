// Linear layer on the CPU: Y[m, n] = X[m, k] . W[n, k]^T (+ bias), W rows in any RowFormat.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {

struct BlockQ8Act;  // int8_dot.h
struct Fp8Panels;   // panels_fp8.h

// w: n rows of k elements in `format`, row j at w + j * w_row_bytes. x: [m, k] fp32 row-major.
// y: [m, n] fp32 row-major. bias: [n] fp32 or null. Work is split over n across the pool.
// quantize_activations: for GGML block-format weights, quantize each X row to int8 blocks once and
// use integer dots (int8_dot.h), as llama.cpp does; other formats ignore it. Off by default: the
// fp32-activation path is the one the exactness tests pin.
void matmul(RowFormat format, const void* w, int64_t w_row_bytes, const float* x, float* y,
            int64_t m, int64_t n, int64_t k, ThreadPool& pool, const float* bias = nullptr,
            Isa isa = best_isa(), bool quantize_activations = false);

// The integer product of matmul(..., quantize_activations = true) with X already quantized: xq
// holds m rows of k / 32 int8 blocks (int8_dot.h), for a caller that quantizes them its own way
// (LLM.int8, llm_int8.h). W in an int8-dot format, in rows; the same sums as matmul's int8 path.
void matmul_q8_act(RowFormat format, const void* w, int64_t w_row_bytes, const BlockQ8Act* xq,
                   float* y, int64_t m, int64_t n, int64_t k, ThreadPool& pool,
                   const float* bias = nullptr, Isa isa = best_isa());

// The same product for F16/BF16 W stored in panels (pack_panels16; can_panel16(format, n, k)):
// fp32 activations, each output one FMA chain over k in order, so a row's outputs are the same
// bits alone or in any batch, at every ISA level (panels16.h).
void matmul_panels16(RowFormat format, const void* w, const float* x, float* y, int64_t m,
                     int64_t n, int64_t k, ThreadPool& pool, const float* bias = nullptr,
                     Isa isa = best_isa());

// The same product for FP8 W in panels (panels_fp8.h; n a multiple of kPanel16Rows): the weights
// as fp8_panel_weight gives them, fp32 activations, each output one FMA chain over k in order (a
// row's outputs the same bits alone or in any batch, at every ISA level).
void matmul_fp8_panels(const Fp8Panels& w, const float* x, float* y, int64_t m, int64_t n,
                       int64_t k, ThreadPool& pool, const float* bias = nullptr,
                       Isa isa = best_isa());

// The same product for BF16 W in pair panels (pack_bf16_pairs; can_bf16_pairs(kBF16, n, k)) on
// a level with bf16 pair dots (has_bf16_pair_matmul): X rounded to bf16, each output one chain of
// pair dots over k in order, so a row's outputs are the same bits alone or in any batch
// (bf16_pairs.h).
void matmul_bf16_pairs(const void* w, const float* x, float* y, int64_t m, int64_t n, int64_t k,
                       ThreadPool& pool, const float* bias = nullptr, Isa isa = best_isa());

// True when `isa` has the bf16 pair-dot GEMM (AVX512_BF16).
bool has_bf16_pair_matmul(Isa isa = best_isa());

// True when `isa` has the int8 GEMM over interleaved weight rows (interleaved_rows.h).
bool has_interleaved_matmul(Isa isa = best_isa());

// Activation rows quantized to int8 and prepared once for the interleaved GEMM, so several
// products with the same input (a layer's q/k/v or gate/up projections) share that work.
class InterleavedInput {
 public:
  // x: [m, k] fp32 (k a multiple of 32). Requires has_interleaved_matmul(isa).
  void prepare(const float* x, int64_t m, int64_t k, ThreadPool& pool, Isa isa = best_isa());
  // The same from rows already quantized (m rows of k / 32 int8 blocks, int8_dot.h), for a
  // caller that quantizes them its own way (LLM.int8, llm_int8.h).
  void prepare_quantized(const BlockQ8Act* xq, int64_t m, int64_t k, ThreadPool& pool,
                         Isa isa = best_isa());
  int64_t rows() const { return m_; }
  int64_t k() const { return k_; }
  const void* data() const { return lines_.data(); }

 private:
  struct alignas(64) Line {
    uint8_t bytes[64];
  };
  std::vector<Line> lines_;
  int64_t m_ = 0, k_ = 0;
};

// y[m, n] = x . W^T (+ bias) for W stored as n interleaved rows of x.k() elements, x prepared
// with the same isa.
void matmul_interleaved(RowFormat format, const void* w, const InterleavedInput& x, float* y,
                        int64_t n, ThreadPool& pool, const float* bias = nullptr,
                        Isa isa = best_isa());

// One of several products with the same prepared input.
struct InterleavedProduct {
  RowFormat format;
  const void* w;  // n interleaved rows
  int64_t n;
  float* y;           // [x.rows(), n]
  const float* bias;  // [n] or null
};

// Every product in one pool call (their work shares the threads' chunks).
void matmul_interleaved(std::span<const InterleavedProduct> products, const InterleavedInput& x,
                        ThreadPool& pool, Isa isa = best_isa());

// The same product for W stored as n interleaved rows (interleave_rows; can_interleave(format, n,
// k)), always with int8-quantized activations. Work is split over groups of 8 rows. Requires
// has_interleaved_matmul(isa).
void matmul_interleaved(RowFormat format, const void* w, const float* x, float* y, int64_t m,
                        int64_t n, int64_t k, ThreadPool& pool, const float* bias = nullptr,
                        Isa isa = best_isa());

}  // namespace lm::kernels
