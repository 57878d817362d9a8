// How a model's CPU Linear weights are stored for the kernels. At load they are the file's rows
// (mapped GGUF or safetensors pages); once int8 activations are on, the ones the CPU reads
// faster in another place are copied into one huge-page arena: interleaved 8 rows at a time for
// the int8 GEMM (kernels/cpu/interleaved_rows.h), F16/BF16 in panels of 16 rows
// (kernels/cpu/panels16.h), or, for the other dtypes it does not take (F32, Q5_K and the
// low-bit Q2_K, Q3_K, IQ4_NL, IQ4_XS), their rows as they are. One arena rather
// than a buffer per weight: a model's matrices are mostly smaller than a 2 MiB page (all of
// SmolLM2's), and only a buffer of whole 2 MiB pages gets huge pages. Streamed weights read faster
// from huge pages than from 4 KiB ones (the hardware prefetcher stops at 4 KiB pages; fewer TLB
// entries cover the stream).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "tensor/tensor.h"

namespace lm::ops {

enum class CpuWeightPlan : uint8_t { kKeep, kInterleave, kCopyRows, kPanels16, kBf16Pairs };

// kInterleave when this CPU has the interleaved int8 GEMM and w (a 2-D CPU weight in rows) has an
// interleaved layout (kernels::can_interleave); else kKeep for an LLM.int8 weight (tensor.h); else,
// when copy_rows (the caller can hand the source's pages back, so a copy does not add to the
// resident size), kBf16Pairs for BF16 rows in whole pair panels where the CPU has bf16 pair dots
// (kernels::has_bf16_pair_matmul, kernels::can_bf16_pairs), kPanels16 for other F16/BF16 rows in
// whole panels (kernels::can_panel16) and kCopyRows for other 2-D CPU weights in rows; else kKeep.
CpuWeightPlan plan_cpu_weight(const Tensor& w, bool copy_rows);

// w's bytes (w.dim(0) * w.row_bytes()) stored at dst as `plan` says (not kKeep), and a view of
// them (layout kInterleaved8 for kInterleave, kPanels16 / kBf16Pairs for those), valid while dst's
// memory lives.
Tensor place_cpu_weight(const Tensor& w, CpuWeightPlan plan, void* dst);

// Puts w, an F16/BF16 CPU matrix in rows of whole panels (kernels::can_panel16) whose memory is
// the caller's own to write, into panels where it lies (the same bytes in another order: pair
// panels where plan_cpu_weight would choose them) and returns true; returns false and leaves
// anything else alone.
bool panel_in_place(Tensor& w);

// An FP8 weight in rows (Tensor::fp8_scales, rows a multiple of kernels::kPanel16Rows) put into
// FP8 panels at dst (w.numel() bytes; kernels/cpu/panels_fp8.h), its scales copied into `scales`
// with their lane table; w then views both (layout kPanels16). The source rows are left alone.
void pack_fp8_weight(Tensor& w, void* dst, Fp8Scales& scales);

// Called after weight `index` was placed, with the tensor it was before (e.g. to hand the
// source's pages back at once, so that loading never holds two copies of the whole model).
using CpuWeightPlaced = std::function<void(size_t index, const Tensor& source)>;

// Plans every weight, places the ones not kept one after another (64-byte aligned) in `arena`
// (huge pages) and repoints them there, calling `placed` after each. Returns each weight's plan,
// in order; `arena` (empty on entry) is left empty when every weight is kept.
std::vector<CpuWeightPlan> prepare_cpu_weights(std::span<Tensor* const> weights, bool copy_rows,
                                               Buffer& arena, const CpuWeightPlaced& placed = {});

}  // namespace lm::ops
