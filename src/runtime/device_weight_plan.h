// How a model goes to a CUDA device: which of its features the CUDA runner computes (the first
// it lacks is the start-up error), and where every weight lives in one device arena and in which
// form -- kept in its stored format where a device kernel reads it (F32, F16, BF16 and GGML's
// Q8_0 / Q4_0 / Q4_1, the formats kernels/cuda/dequant_gemv reads), our Q4_Z128 re-encoded
// exactly into Q4_0 (where every value is a Q4_0 level) or Q8_0 at upload, converted to F16 at
// upload otherwise (K-quants, Q5, the low-bit and bitsandbytes formats), and the embedding table
// in a float format (the gather reads F32 / F16 / BF16). Host data only: tested on the CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "kernels/cpu/row_format.h"
#include "model/llama_weights.h"
#include "model/model_config.h"

namespace lm {

// Arena offsets are multiples of this (cudaMalloc's own alignment; vector loads need 16).
inline constexpr int64_t kDeviceArenaAlignment = 256;
inline constexpr int64_t device_aligned(int64_t bytes) {
  return (bytes + kDeviceArenaAlignment - 1) / kDeviceArenaAlignment * kDeviceArenaAlignment;
}

// The stored formats a device kernel reads as they are.
bool device_reads_stored_format(kernels::RowFormat format);

struct DeviceMatrix {
  std::string name;                // "layers.3.q_proj", "embed_tokens", "lm_head"
  const Tensor* source = nullptr;  // the host weight (rows as loaded)
  kernels::RowFormat stored{};     // its format on the host
  kernels::RowFormat device{};     // the arena's: `stored`, or what it is converted to at upload
                                   // (kF16; Q4_0 / Q8_0 from Q4_Z128)
  int64_t rows = 0, cols = 0;      // [out_features, in_features]
  int64_t row_bytes = 0;           // of a device row
  int64_t offset = 0, bytes = 0;   // in the arena
  bool converted() const { return device != stored; }
};

struct DeviceVector {
  std::string name;           // "layers.3.input_layernorm", "norm", "rope.inv_freq"
  std::vector<float> values;  // a copy: norms and biases are small
  int64_t offset = 0;
};

// Where a layer's tensors are: indices into DeviceWeightPlan::matrices / vectors (-1: absent).
struct DeviceLayerSlots {
  int32_t q_proj = -1, k_proj = -1, v_proj = -1, o_proj = -1;
  int32_t gate_proj = -1, up_proj = -1, down_proj = -1;
  int32_t input_layernorm = -1, post_attention_layernorm = -1;
  int32_t q_bias = -1, k_bias = -1, v_bias = -1;
};

struct DeviceWeightPlan {
  std::vector<DeviceMatrix> matrices;
  std::vector<DeviceVector> vectors;
  std::vector<DeviceLayerSlots> layers;
  int32_t embed_tokens = -1, lm_head = -1;  // matrices (one entry when tied and alike)
  int32_t norm = -1, rope_inv_freq = -1;    // vectors
  float rope_attention_scaling = 1.0f;
  int64_t arena_bytes = 0;
  // The most elements of a matrix the batched GEMM reads after dequantizing it to F16 (every
  // device format but F16 and BF16): the size of that scratch.
  int64_t max_dequantized_elements = 0;
  int64_t num_converted = 0;  // matrices converted at upload

  // "34 matrices (12 Q4_1, 22 F16 converted from Q6_K), 1.21 GiB on the device".
  std::string summary() const;
};

// Ok when the CUDA runner computes every part of this model; else the first it lacks, as the
// sentence --device cuda fails with.
Status check_cuda_runner_supports(const ModelConfig& config);

// The arena for `weights` (which must stay alive and unchanged while the plan is used).
Result<DeviceWeightPlan> plan_device_weights(const ModelConfig& config,
                                             const LlamaWeights& weights);

}  // namespace lm
