// --dtype at load (TGI's flag): the float weight matrices (F32/F16/BF16) are re-encoded in the
// requested dtype; block-quantized GGUF matrices keep their format, as compute is fp32 anyway
// (in TGI --dtype of a quantized model names the activations' dtype, which here is always fp32).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/thread_pool.h"
#include "model/llama_weights.h"
#include "tensor/tensor.h"

namespace lm {

struct WeightsSummary {
  int64_t bytes = 0;          // every weight matrix (a tied head once) + fp32 norms and biases
  int64_t num_matrices = 0;   // a tied head counted once
  int64_t num_converted = 0;  // float matrices whose dtype --dtype changes
  int64_t num_quantized = 0;  // block-quantized matrices, kept as stored
  std::string stored_dtypes;  // the matrices' dtypes in the files, e.g. "Q4_1, Q6_K"
};

// The weights as they are, or as they would be once converted to `dtype`.
WeightsSummary summarize_weights(const LlamaWeights& w, std::optional<DType> dtype = {});

// Converts every float matrix whose dtype differs from `dtype` into `arena` (allocated here, one
// huge-page buffer), matrices spread over `pool`, and repoints them there; `converted` is called
// with each source afterwards, from the pool's threads (to hand its mapped pages back). Does
// nothing when no matrix changes.
void convert_float_weights(LlamaWeights& w, DType dtype, Buffer& arena, ThreadPool& pool,
                           const std::function<void(const Tensor& source)>& converted = {});

}  // namespace lm
