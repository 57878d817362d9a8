// --dtype at load (TGI's flag): the float weight matrices (F32/F16/BF16) are re-encoded in the
// requested dtype; block-quantized GGUF matrices keep their format, as compute is fp32 anyway
// (in TGI --dtype of a quantized model names the activations' dtype, which here is always fp32).
#pragma once

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/thread_pool.h"
#include "model/llama_weights.h"
#include "ops/convert_weight.h"
#include "tensor/tensor.h"

namespace lm {

struct WeightsSummary {
  int64_t bytes = 0;          // every weight matrix (a tied head once) + fp32 norms and biases
  int64_t num_matrices = 0;   // a tied head counted once
  int64_t num_converted = 0;  // float matrices whose dtype --dtype (or --quantize) changes
  int64_t num_quantized = 0;  // block-quantized matrices, kept as stored
  std::string stored_dtypes;  // the matrices' dtypes in the files, e.g. "Q4_1, Q6_K"
};

// The weights as they are, or as they would be once quantized to `quantize` and converted to
// `dtype` (quantize_float_weights, then convert_float_weights).
WeightsSummary summarize_weights(const LlamaWeights& w, std::optional<DType> dtype = {},
                                 std::optional<DType> quantize = {});

// The --quantize values that quantize float weights at load: ours, "q8_0", "q4_0", "q4_1",
// "q5_0", "q5_1", "q4_k", "q5_k", "q6_k" (as llama.cpp's quantize does offline), and TGI's
// "bitsandbytes-nf4" / "bitsandbytes-fp4" -> their block type, TGI's "eetq" -> Q8_0 (EETQ's
// per-channel int8 values and fp16 scales are exactly Q8_0 blocks) and "bitsandbytes" (LLM.int8)
// -> Q8_0 (its int8 values in blocks of scale 1, the rows' absmax beside), TGI's "fp8" -> F8_E4M3
// (one scale a tensor); nullopt for any other.
std::optional<DType> load_quantization_dtype(std::string_view flag);
// How --quantize `flag` writes its block type's rows: EETQ's quantizer for "eetq", LLM.int8's for
// "bitsandbytes", TGI's per-tensor FP8 one for "fp8", the type's own for the others.
ops::RowQuantizer load_row_quantizer(std::string_view flag);

// Quantizes every float Linear matrix that --quantize quantizes to `block` (the layers' Linears
// but an MoE router, which llama.cpp keeps in float too, and an untied LM head; the embedding
// table stays float, so the lookup is exact; matrices whose rows are not whole blocks take
// llama.cpp's fallback type, ops::load_quantization_target, or stay float) into `arena` (allocated
// here, one huge-page buffer), matrices spread over `pool`, and repoints them there; `quantized` is
// called with each source afterwards, from the pool's threads. Returns how many matrices were
// quantized.
// For kFp8Tensor (F8_E4M3) each quantized matrix's Fp8Scales are appended to `fp8_scales`
// (required then) and the matrix points at them; its rows still need packing into FP8 panels.
int64_t quantize_float_weights(LlamaWeights& w, DType block, ops::RowQuantizer quantizer,
                               Buffer& arena, ThreadPool& pool,
                               const std::function<void(const Tensor& source)>& quantized = {},
                               std::deque<Fp8Scales>* fp8_scales = nullptr);

// Converts every float matrix whose dtype differs from `dtype` into `arena` (allocated here, one
// huge-page buffer), matrices spread over `pool`, and repoints them there; `converted` is called
// with each source afterwards, from the pool's threads (to hand its mapped pages back). Does
// nothing when no matrix changes.
void convert_float_weights(LlamaWeights& w, DType dtype, Buffer& arena, ThreadPool& pool,
                           const std::function<void(const Tensor& source)>& converted = {});

}  // namespace lm
