// A pre-quantized checkpoint's Linears (GPTQ, AWQ, compressed-tensors) turned into plain
// `<module>.weight` tensors at load: each module's packed tensors are read (packed_linears.h)
// and repacked exactly into a GGML block format or fp32 rows (integer_linear.h), so the model
// binds them by their usual names and the kernels never see the checkpoint's format.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "loader/quantization_config.h"
#include "tensor/tensor.h"

namespace lm {

struct RepackSummary {
  std::map<DType, int64_t> num_by_dtype;  // repacked Linears by the dtype they are held in
  // "gptq 4-bit: 14 Linears as Q4_0" (or with the fp32 fallback's count), for the start log.
  std::string text;
  // The memory the repacked weights lie in (file views are not listed: an FP8 weight kept as
  // stored), for WeightStore::drop_pages.
  std::vector<std::span<const uint8_t>> repacked_bytes;
};

// Called with each of a module's checkpoint tensors once the module is repacked (from the
// repacking threads): e.g. to hand their file pages back.
using PackedTensorsDone = std::function<void(const Tensor&)>;

// Replaces in `tensors` every quantized Linear's tensors by `<module>.weight`, whose memory is
// appended to `owners`. Errors name the tensor (missing, wrong dtype or shape, mismatched group
// size, truncated pack, g_idx, zero-point out of range, non-finite scale).
Result<RepackSummary> repack_quantized_linears(const QuantizationConfig& q,
                                               std::map<std::string, Tensor>& tensors,
                                               std::vector<std::shared_ptr<const void>>& owners,
                                               const PackedTensorsDone& done = {});

}  // namespace lm
