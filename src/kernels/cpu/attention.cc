// Causal attention over a contiguous cache: one sequence whose position p sits at
// p * kv_row_stride, handed to the shared row-chunk attention (attention_work.h).
#include "kernels/cpu/attention.h"

#include <vector>

#include "base/check.h"
#include "kernels/cpu/attention_work.h"

namespace lm::kernels {

void attention_causal(const float* q, const float* k_cache, const float* v_cache, float* out,
                      int64_t num_tokens, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                      int64_t kv_row_stride, int64_t first_position, float scale, ThreadPool& pool,
                      Isa isa) {
  LM_CHECK(num_tokens >= 0 && head_dim > 0 && first_position >= 0);
  LM_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0);
  LM_CHECK(kv_row_stride >= num_kv_heads * head_dim);
  std::vector<int64_t> offsets(static_cast<size_t>(first_position + num_tokens));
  for (size_t p = 0; p < offsets.size(); ++p) offsets[p] = static_cast<int64_t>(p) * kv_row_stride;
  const AttentionSequence sequence{0, num_tokens, first_position, offsets.data()};
  attend_sequences(isa_kernels(isa), q, out, &sequence, 1, {k_cache, v_cache, KvFormat::kF32},
                   num_heads, num_kv_heads, head_dim, scale, /*softcap=*/0.0f, pool);
}

}  // namespace lm::kernels
