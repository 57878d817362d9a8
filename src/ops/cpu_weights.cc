#include "ops/cpu_weights.h"

#include <cstring>

#include "kernels/cpu/bf16_pairs.h"
#include "kernels/cpu/interleaved_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/panels16.h"
#include "kernels/cpu/panels_fp8.h"
#include "kernels/cpu/row_format.h"
#include "ops/linear.h"

namespace lm::ops {
namespace {

bool cpu_rows(const Tensor& w) {
  return w.device == Device::kCpu && w.rank() == 2 && w.layout == WeightLayout::kRows;
}

int64_t weight_bytes(const Tensor& w) { return w.dim(0) * w.row_bytes(); }

bool pairs_pay(kernels::RowFormat format, const Tensor& w) {
  return kernels::has_bf16_pair_matmul() && kernels::can_bf16_pairs(format, w.dim(0), w.dim(1));
}

}  // namespace

CpuWeightPlan plan_cpu_weight(const Tensor& w, bool copy_rows) {
  if (!cpu_rows(w)) return CpuWeightPlan::kKeep;
  const auto format = row_format(w.dtype);
  // LLM.int8 weights (Q8_0 rows of scale 1 and a row absmax) are interleaved like any Q8_0 and
  // run with their own activation quantization (ops::linear).
  if (format && kernels::has_interleaved_matmul() &&
      kernels::can_interleave(*format, w.dim(0), w.dim(1)))
    return CpuWeightPlan::kInterleave;
  // Other LLM.int8 weights are read as rows where they lie (the arena --quantize wrote them to).
  if (!copy_rows || !format || w.int8_row_absmax != nullptr) return CpuWeightPlan::kKeep;
  if (pairs_pay(*format, w)) return CpuWeightPlan::kBf16Pairs;
  return kernels::can_panel16(*format, w.dim(0), w.dim(1)) ? CpuWeightPlan::kPanels16
                                                           : CpuWeightPlan::kCopyRows;
}

Tensor place_cpu_weight(const Tensor& w, CpuWeightPlan plan, void* dst) {
  LM_CHECK(plan != CpuWeightPlan::kKeep && cpu_rows(w));
  Tensor placed = w;
  placed.data = dst;
  if (plan == CpuWeightPlan::kInterleave) {
    kernels::interleave_rows(*row_format(w.dtype), w.data, w.row_bytes(), w.dim(0), w.dim(1), dst);
    placed.layout = WeightLayout::kInterleaved8;
  } else if (plan == CpuWeightPlan::kPanels16) {
    kernels::pack_panels16(*row_format(w.dtype), w.data, w.row_bytes(), w.dim(0), w.dim(1), dst);
    placed.layout = WeightLayout::kPanels16;
  } else if (plan == CpuWeightPlan::kBf16Pairs) {
    kernels::pack_bf16_pairs(w.data, w.row_bytes(), w.dim(0), w.dim(1), dst);
    placed.layout = WeightLayout::kBf16Pairs;
  } else {
    std::memcpy(dst, w.data, static_cast<size_t>(weight_bytes(w)));
  }
  return placed;
}

bool panel_in_place(Tensor& w) {
  if (!cpu_rows(w)) return false;
  const auto format = row_format(w.dtype);
  if (!format || !kernels::can_panel16(*format, w.dim(0), w.dim(1)) ||
      w.row_bytes() != 2 * w.dim(1))
    return false;
  if (pairs_pay(*format, w)) {
    kernels::pack_bf16_pairs(w.data, w.row_bytes(), w.dim(0), w.dim(1), w.data);
    w.layout = WeightLayout::kBf16Pairs;
    return true;
  }
  kernels::pack_panels16(*format, w.data, w.row_bytes(), w.dim(0), w.dim(1), w.data);
  w.layout = WeightLayout::kPanels16;
  return true;
}

void pack_fp8_weight(Tensor& w, void* dst, Fp8Scales& scales) {
  LM_CHECK(cpu_rows(w) && w.fp8_scales != nullptr && w.dim(0) % kernels::kPanel16Rows == 0);
  const int64_t n = w.dim(0), k = w.dim(1);
  const auto format =
      w.dtype == DType::kF8_E5M2 ? kernels::Fp8Format::kE5M2 : kernels::Fp8Format::kE4M3;
  scales = *w.fp8_scales;
  scales.lanes.resize(static_cast<size_t>(n * scales.grid_cols));
  kernels::fp8_lane_scales(scales.grid.data(), scales.block_rows, scales.grid_cols, n, format,
                           scales.lanes.data());
  kernels::pack_fp8_panels(static_cast<const uint8_t*>(w.data), n, k, static_cast<uint8_t*>(dst));
  w.data = dst;
  w.layout = WeightLayout::kPanels16;
  w.fp8_scales = &scales;
}

std::vector<CpuWeightPlan> prepare_cpu_weights(std::span<Tensor* const> weights, bool copy_rows,
                                               Buffer& arena, const CpuWeightPlaced& placed) {
  // A weight copied into a previous arena would be read from that arena after it is freed.
  LM_CHECK_MSG(arena.view().empty(), "prepare_cpu_weights needs an empty arena");
  std::vector<CpuWeightPlan> plans;
  std::vector<int64_t> offsets;
  int64_t bytes = 0;
  for (const Tensor* w : weights) {
    plans.push_back(plan_cpu_weight(*w, copy_rows));
    offsets.push_back(bytes);
    if (plans.back() != CpuWeightPlan::kKeep) bytes += (weight_bytes(*w) + 63) / 64 * 64;
  }
  arena = bytes > 0 ? Buffer::of_bytes(bytes, Buffer::Pages::kHuge) : Buffer();
  auto* base = static_cast<uint8_t*>(arena.view().data);
  for (size_t i = 0; i < weights.size(); ++i) {
    if (plans[i] == CpuWeightPlan::kKeep) continue;
    const Tensor source = *weights[i];
    *weights[i] = place_cpu_weight(source, plans[i], base + offsets[i]);
    if (placed) placed(i, source);
  }
  return plans;
}

}  // namespace lm::ops
