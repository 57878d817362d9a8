// LLM.int8 (bitsandbytes' Linear8bitLt; TGI's --quantize bitsandbytes): int8 weight rows with one
// fp32 absmax each, and activations quantized to int8 per token except their outliers, which are
// multiplied in float.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/cpu/int8_dot.h"
#include "kernels/cpu/isa.h"

namespace lm::kernels {

// The activation magnitude from which LLM.int8 keeps a value in float (TGI's and transformers'
// threshold).
inline constexpr float kLlmInt8Threshold = 6.0f;

// Quantizes one weight row (k values, k a multiple of 32) as bitsandbytes' Int8Params does: the
// row in fp16, absmax = its largest magnitude, q = round(w * (127 / absmax)) in fp32 (127 / absmax
// as torch computes it), half to even. Writes q as k / 32 Q8_0 blocks whose scale is 1 (the
// kernels then read q itself) and returns absmax, the row's scale times 127 (0 for an all-zero
// row, whose q are 0).
float quantize_row_llm_int8(const float* src, void* dst, int64_t k);

// Each activation row's outliers: row r's are column[i], value[i] for i in [begin[r], begin[r+1]).
struct LlmInt8Outliers {
  std::vector<int64_t> begin;
  std::vector<int32_t> column;
  std::vector<float> value;  // as given (fp32)
};

// x [m, k] fp32 split as LLM.int8 splits each token: the row cast to fp16; values of magnitude
// >= kLlmInt8Threshold there are outliers, listed in `outliers` with their fp32 values; the rest
// are quantized with the row's absmax over them, a = round(x16 * (127 / absmax)) half to even,
// into xq (m rows of k / 32 blocks, int8_dot.h; an outlier's place holds 0) whose scale d makes
// the integer dot with LLM.int8 weight rows, times their absmax / 127, what bitsandbytes computes.
// Per token where bitsandbytes takes a column as an outlier in every row of a call once any row
// has one there: the same for one row, and a token's output does not depend on its batch. With
// `pool`, the rows are split over its threads (the same bits and lists: each row is its own);
// `isa` avx2 and up runs eight values at a time (llm_int8_avx2.h, the same bits).
void quantize_rows_llm_int8(const float* x, int64_t m, int64_t k, BlockQ8Act* xq,
                            LlmInt8Outliers& outliers, ThreadPool* pool = nullptr,
                            Isa isa = best_isa());

// y[r, j] += sum over row r's outliers (c, v) of v * q[j, c], for output columns j in [j0, j1)
// of y [m, n]: w holds the n LLM.int8 weight rows of k values (Q8_0 blocks of scale 1), in rows
// or interleaved (interleaved_rows.h).
void add_llm_int8_outliers(const LlmInt8Outliers& outliers, const void* w, bool interleaved,
                           int64_t k, float* y, int64_t m, int64_t n, int64_t j0, int64_t j1);

}  // namespace lm::kernels
