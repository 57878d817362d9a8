// Which experts each token of a step goes to, and with what weight, regrouped by expert: the
// router's softmax over all experts, the top-k kept (renormalized over them when asked), as
// transformers' Mixtral/Qwen-MoE routers compute them. Plain data, no tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lm {

struct ExpertRouting {
  // Expert e serves tokens[begins[e] .. begins[e + 1]) (increasing token order) with
  // weights[...] the same range: begins has num_experts + 1 entries.
  std::vector<int32_t> begins;
  std::vector<int32_t> tokens;
  std::vector<float> weights;

  int64_t num_tokens_of(int64_t expert) const {
    return begins[static_cast<size_t>(expert) + 1] - begins[static_cast<size_t>(expert)];
  }
};

// logits: [num_tokens, num_experts] row-major. Ties in probability go to the lower expert index.
ExpertRouting route_tokens(const float* logits, int64_t num_tokens, int64_t num_experts,
                           int64_t top_k, bool normalize_top_k);

}  // namespace lm
