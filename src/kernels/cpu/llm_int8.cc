// LLM.int8's quantizers as bitsandbytes runs them on the CPU (backends/default/ops.py,
// int8_vectorwise_quant): the values in fp16, absmax as fp32, the fp32 factor 127 / absmax as
// torch computes a scalar over a tensor (the reciprocal, times 127: factor() below), each product
// rounded half to even (torch.round). For the activations the outliers are zeroed before the
// absmax is taken.
#include "kernels/cpu/llm_int8.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/cpu/interleaved_rows.h"
#include "kernels/cpu/llm_int8_avx2.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/row_format.h"

namespace lm::kernels {
namespace {

float through_fp16(float v) { return fp16_to_fp32(fp32_to_fp16(v)); }

// How many weight values add_llm_int8_outliers gathers at once (columns with outliers x outputs):
// 256 KiB of floats, whether a model has a handful of outlier columns or, diverging, thousands.
constexpr int64_t kGatheredValues = 64 * 1024;

// bitsandbytes' `127.0 / absmax`: torch's scalar-over-tensor division is reciprocal(absmax) * 127,
// which is not always 127 / absmax rounded (a tie at .5 turns on it). 0 for an all-zero row.
float factor(float absmax) { return absmax == 0.0f ? 0.0f : (1.0f / absmax) * 127.0f; }

// round(v * factor) half to even, as an int8 value (|v * factor| <= 127 once v <= absmax). A value
// past fp16's range (inf) or NaN, which a hostile file or a diverging model can hold, gives the
// clamp's bound or 0 rather than an out-of-range conversion. Clamped first, then rounded by adding
// and taking away 1.5 * 2^23 (round to nearest even, the default mode, for |p| <= 2^22): the same
// values as nearbyint then clamp (127 is an integer), without a libm call per activation.
float quantized(float v, float factor) {
  const float p = v * factor;
  if (std::isnan(p)) return 0.0f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  return (std::clamp(p, -127.0f, 127.0f) + kRound) - kRound;
}

// Row r of quantize_rows_llm_int8: its outliers appended to `column` / `value`.
void quantize_activation_row(const float* xr, int64_t k, BlockQ8Act* blocks,
                             std::vector<int32_t>& column, std::vector<float>& value, bool avx2) {
  // Per Linear call on the serving path: the row buffer is kept, not allocated each time.
  thread_local std::vector<float> row_buffer;
  row_buffer.resize(static_cast<size_t>(k));
  float* row = row_buffer.data();  // not the thread_local's name in the loops: no TLS lookups
  if (avx2) return quantize_activation_row_avx2(xr, k, blocks, column, value, row);
  float absmax = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    const float a = through_fp16(xr[i]);
    if (std::fabs(a) >= kLlmInt8Threshold) {
      column.push_back(static_cast<int32_t>(i));
      value.push_back(xr[i]);
      row[i] = 0.0f;  // zeroed before the absmax, as bitsandbytes does
    } else {
      row[i] = a;
      absmax = std::max(absmax, std::fabs(a));
    }
  }
  const float f = factor(absmax);
  // The integer dot times d is then acc * absmax * (bitsandbytes' constant for 1 / 127^2) * 127,
  // and the product's scale absmax_w / 127 (ops::linear) makes it bitsandbytes' dequantized
  // value acc * absmax_x * absmax_w * 6.200124e-05 (its CPU int8_mm_dequant's constant, 1.8e-5
  // above 1 / 127^2 = 6.2000124e-05).
  const float d = absmax * (6.200124e-05f * 127.0f);
  for (int64_t b = 0; b < k / kQuantBlockSize; ++b) {
    int32_t sum = 0;
    for (int64_t i = 0; i < kQuantBlockSize; ++i) {
      const auto q = static_cast<int32_t>(quantized(row[b * kQuantBlockSize + i], f));
      blocks[b].qs[i] = static_cast<int8_t>(q);
      sum += q;
    }
    blocks[b].d = d;
    blocks[b].s = d * static_cast<float>(sum);
  }
}

}  // namespace

float quantize_row_llm_int8(const float* src, void* dst, int64_t k) {
  LM_CHECK(k % kQuantBlockSize == 0);
  std::vector<float> row(static_cast<size_t>(k));
  float absmax = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    row[static_cast<size_t>(i)] = through_fp16(src[i]);
    absmax = std::max(absmax, std::fabs(row[static_cast<size_t>(i)]));
  }
  // An all-zero row: bitsandbytes computes 0 * inf = NaN and casts it to int8; 0 here, times a
  // zero absmax either way.
  const float f = factor(absmax);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < k / kQuantBlockSize; ++b) {
    uint8_t* block = out + b * quant::kQ8_0Bytes;
    quant::store_f16(block, 1.0f);
    for (int64_t i = 0; i < kQuantBlockSize; ++i) {
      const float q = quantized(row[static_cast<size_t>(b * kQuantBlockSize + i)], f);
      block[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
  return absmax;
}

void quantize_rows_llm_int8(const float* x, int64_t m, int64_t k, BlockQ8Act* xq,
                            LlmInt8Outliers& outliers, ThreadPool* pool, Isa isa) {
  LM_CHECK(k % kQuantBlockSize == 0);
  const bool avx2 = isa >= Isa::kAvx2 && isa_supported(Isa::kAvx2) && llm_int8_avx2_built();
  outliers.begin.assign(1, 0);
  outliers.column.clear();
  outliers.value.clear();
  const int64_t num_blocks = k / kQuantBlockSize;
  if (pool == nullptr || m == 1) {
    for (int64_t r = 0; r < m; ++r) {
      quantize_activation_row(x + r * k, k, xq + r * num_blocks, outliers.column, outliers.value,
                              avx2);
      outliers.begin.push_back(static_cast<int64_t>(outliers.column.size()));
    }
    return;
  }
  // Each row's outliers in a list of its own (kept across calls: this caller's), joined in row
  // order after. A prompt's rows were quantized on one thread, a quarter of its LLM.int8 prefill.
  struct RowOutliers {
    std::vector<int32_t> column;
    std::vector<float> value;
  };
  thread_local std::vector<RowOutliers> callers_rows;
  std::vector<RowOutliers>& rows = callers_rows;  // the pool's threads see the caller's
  if (static_cast<int64_t>(rows.size()) < m) rows.resize(static_cast<size_t>(m));
  pool->parallel_for(m, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      RowOutliers& o = rows[static_cast<size_t>(r)];
      o.column.clear();
      o.value.clear();
      quantize_activation_row(x + r * k, k, xq + r * num_blocks, o.column, o.value, avx2);
    }
  });
  for (int64_t r = 0; r < m; ++r) {
    const RowOutliers& o = rows[static_cast<size_t>(r)];
    outliers.column.insert(outliers.column.end(), o.column.begin(), o.column.end());
    outliers.value.insert(outliers.value.end(), o.value.begin(), o.value.end());
    outliers.begin.push_back(static_cast<int64_t>(outliers.column.size()));
  }
}

void add_llm_int8_outliers(const LlmInt8Outliers& outliers, const void* w, bool interleaved,
                           int64_t k, float* y, int64_t m, int64_t n, int64_t j0, int64_t j1) {
  const auto* base = static_cast<const uint8_t*>(w);
  const int64_t w_row_bytes = k / kQuantBlockSize * quant::kQ8_0Bytes;
  // Value c of row j: in rows, byte 2 + c % 32 of the row's block c / 32; interleaved, the same
  // block of the row's group of 8 holds the 8 rows' scales (16 bytes) and then, per word of 8
  // values, the 8 rows' words in turn (interleaved_rows.h).
  const auto q_at = [&](int64_t j, int32_t c) {
    const int64_t b = c / kQuantBlockSize, i = c % kQuantBlockSize;
    if (!interleaved)
      return static_cast<int8_t>(base[j * w_row_bytes + b * quant::kQ8_0Bytes + 2 + i]);
    const int64_t group = j / kInterleavedRows, r = j % kInterleavedRows;
    return static_cast<int8_t>(
        base[group * kInterleavedRows * w_row_bytes + b * kInterleavedRows * quant::kQ8_0Bytes +
             2 * kInterleavedRows + ((i / 8) * kInterleavedRows + r) * 8 + i % 8]);
  };
  if (outliers.column.empty() || j1 <= j0) return;
  // A model's outliers sit in a few columns, the same token after token: each of those columns
  // of the weight is gathered once per call (one scattered read a weight row), then every row's
  // outlier terms run along contiguous outputs. Each output's terms are summed in the row's
  // order, then added: the same bits as one sum per output. The outputs go in chunks that keep
  // the gathered values within kGatheredValues however many columns have outliers.
  thread_local std::vector<int32_t> columns_buffer;
  thread_local std::vector<float> gathered_buffer, sum_buffer;
  std::vector<int32_t>& columns = columns_buffer;
  columns.assign(outliers.column.begin(), outliers.column.end());
  std::sort(columns.begin(), columns.end());
  columns.erase(std::unique(columns.begin(), columns.end()), columns.end());
  const auto num_columns = static_cast<int64_t>(columns.size());
  const int64_t chunk = std::max<int64_t>(1, kGatheredValues / num_columns);
  std::vector<float>& gathered = gathered_buffer;  // [columns][width], the int8 values as floats
  std::vector<float>& sum = sum_buffer;
  for (int64_t c0 = j0; c0 < j1; c0 += chunk) {
    const int64_t c1 = std::min(j1, c0 + chunk), width = c1 - c0;
    gathered.resize(static_cast<size_t>(num_columns * width));
    for (int64_t c = 0; c < num_columns; ++c)
      for (int64_t j = c0; j < c1; ++j)
        gathered[static_cast<size_t>(c * width + j - c0)] =
            static_cast<float>(q_at(j, columns[static_cast<size_t>(c)]));
    sum.resize(static_cast<size_t>(width));
    for (int64_t r = 0; r < m; ++r) {
      const auto first = static_cast<size_t>(outliers.begin[static_cast<size_t>(r)]);
      const auto last = static_cast<size_t>(outliers.begin[static_cast<size_t>(r) + 1]);
      if (first == last) continue;
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (size_t o = first; o < last; ++o) {
        const int64_t c =
            std::lower_bound(columns.begin(), columns.end(), outliers.column[o]) - columns.begin();
        const float v = outliers.value[o];
        const float* g = gathered.data() + c * width;
        for (int64_t j = 0; j < width; ++j) sum[static_cast<size_t>(j)] += v * g[j];
      }
      float* yr = y + r * n + c0;
      for (int64_t j = 0; j < width; ++j) yr[j] += sum[static_cast<size_t>(j)];
    }
  }
}

}  // namespace lm::kernels
