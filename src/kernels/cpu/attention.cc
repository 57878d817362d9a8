// Causal attention: one (token, head) pair per work item; each walks its visible positions in
// tiles, keeping a running max and denominator so the output is rescaled instead of recomputed.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/online_softmax.h"

namespace lm::kernels {

void attention_causal(const float* q, const float* k_cache, const float* v_cache, float* out,
                      int64_t num_tokens, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                      int64_t kv_row_stride, int64_t first_position, float scale, ThreadPool& pool,
                      Isa isa) {
  LM_CHECK(num_tokens >= 0 && head_dim > 0 && first_position >= 0);
  LM_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0);
  LM_CHECK(kv_row_stride >= num_kv_heads * head_dim);
  const IsaKernels& kernels = isa_kernels(isa);
  const int64_t group_size = num_heads / num_kv_heads;

  pool.parallel_for(num_tokens * num_heads, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(kAttentionPositionTile);
    std::vector<float> acc(static_cast<size_t>(head_dim));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t token = item / num_heads;
      const int64_t head = item % num_heads;
      const int64_t kv_offset = (head / group_size) * head_dim;
      const int64_t num_positions = first_position + token + 1;
      attend_row(
          kernels, q + item * head_dim, k_cache + kv_offset, v_cache + kv_offset,
          [kv_row_stride](int64_t p) { return p * kv_row_stride; }, num_positions, head_dim, scale,
          scores.data(), acc.data(), out + item * head_dim);
    }
  });
}

}  // namespace lm::kernels
