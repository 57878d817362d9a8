#include "model/expert_routing.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace lm {

ExpertRouting route_tokens(const float* logits, int64_t num_tokens, int64_t num_experts,
                           int64_t top_k, bool normalize_top_k) {
  LM_CHECK(num_experts > 0 && top_k > 0 && top_k <= num_experts);
  const auto k = static_cast<size_t>(top_k);
  // Per token: its top-k (expert, weight) pairs.
  std::vector<int32_t> chosen(static_cast<size_t>(num_tokens) * k);
  std::vector<float> chosen_weights(chosen.size());
  std::vector<float> probs(static_cast<size_t>(num_experts));
  std::vector<int32_t> order(static_cast<size_t>(num_experts));
  std::vector<int32_t> counts(static_cast<size_t>(num_experts), 0);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* row = logits + t * num_experts;
    const float max = *std::max_element(row, row + num_experts);
    float sum = 0;
    for (int64_t e = 0; e < num_experts; ++e) {
      probs[static_cast<size_t>(e)] = std::exp(row[e] - max);
      sum += probs[static_cast<size_t>(e)];
    }
    for (float& p : probs) p /= sum;
    for (int32_t e = 0; e < static_cast<int32_t>(num_experts); ++e)
      order[static_cast<size_t>(e)] = e;
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      const float pa = probs[static_cast<size_t>(a)], pb = probs[static_cast<size_t>(b)];
      return pa > pb || (pa == pb && a < b);
    });
    float top_sum = 0;
    for (size_t j = 0; j < k; ++j) top_sum += probs[static_cast<size_t>(order[j])];
    for (size_t j = 0; j < k; ++j) {
      const int32_t e = order[j];
      chosen[static_cast<size_t>(t) * k + j] = e;
      const float p = probs[static_cast<size_t>(e)];
      chosen_weights[static_cast<size_t>(t) * k + j] = normalize_top_k ? p / top_sum : p;
      ++counts[static_cast<size_t>(e)];
    }
  }
  // Regroup by expert (a counting sort), tokens in increasing order within each expert.
  ExpertRouting r;
  r.begins.assign(static_cast<size_t>(num_experts) + 1, 0);
  for (int64_t e = 0; e < num_experts; ++e)
    r.begins[static_cast<size_t>(e) + 1] =
        r.begins[static_cast<size_t>(e)] + counts[static_cast<size_t>(e)];
  r.tokens.resize(chosen.size());
  r.weights.resize(chosen.size());
  std::vector<int32_t> next(r.begins.begin(), r.begins.end() - 1);
  for (size_t i = 0; i < chosen.size(); ++i) {
    const auto slot = static_cast<size_t>(next[static_cast<size_t>(chosen[i])]++);
    r.tokens[slot] = static_cast<int32_t>(i / k);
    r.weights[slot] = chosen_weights[i];
  }
  return r;
}

}  // namespace lm
