// Rotary inverse frequencies for every supported scaling, computed as HF transformers does
// (fp32), so rotated queries and keys match the reference bit for bit where possible.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace lm {

struct RopeFrequencies {
  std::vector<float> inv_freq;  // [head_dim / 2]
  float attention_scaling = 1.0f;
};

// `seq_len` is the length the current forward pass reaches (last position + 1); only dynamic
// NTK scaling and LongRoPE depend on it (YaRN does not). `freq_factors` (GGUF's rope_freqs.weight)
// divides the base frequencies when non-empty.
RopeFrequencies rope_frequencies(const ModelConfig& config, int64_t seq_len,
                                 const std::vector<float>& freq_factors = {});
// The same for one of the model's RoPE settings (ModelConfig::rope_of(layer)).
RopeFrequencies rope_frequencies(const ModelConfig& config, const RopeConfig& rope, int64_t seq_len,
                                 const std::vector<float>& freq_factors = {});

}  // namespace lm
