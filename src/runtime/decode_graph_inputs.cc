#include "runtime/decode_graph_inputs.h"

#include <algorithm>

#include "base/check.h"

namespace lm {

bool is_pure_decode(const BatchInput& batch) {
  const int64_t n = batch.num_tokens();
  if (n == 0 || batch.num_seqs() != n || static_cast<int64_t>(batch.logit_rows.size()) != n)
    return false;
  for (int64_t s = 0; s < n; ++s) {
    if (batch.query_begins[static_cast<size_t>(s)] != s) return false;
    if (batch.logit_rows[static_cast<size_t>(s)] != s) return false;
  }
  return true;
}

void fill_decode_graph_inputs(const BatchInput& batch, const DecodeGraphShape& shape,
                              DecodeGraphInputs& out) {
  LM_CHECK(is_pure_decode(batch));
  const int64_t n = batch.num_seqs();
  LM_CHECK(shape.num_seqs >= n && shape.max_blocks_per_seq >= batch.max_blocks_per_seq);
  const auto rows = static_cast<size_t>(shape.num_seqs);
  const auto width = static_cast<size_t>(shape.max_blocks_per_seq);
  out.token_ids.assign(rows, 0);
  out.positions.assign(rows, 0);
  out.slot_mapping.assign(rows, -1);
  out.context_lens.assign(rows, 1);
  out.block_tables.assign(rows * width, 0);
  const auto source_width = static_cast<size_t>(batch.max_blocks_per_seq);
  for (size_t s = 0; s < static_cast<size_t>(n); ++s) {
    out.token_ids[s] = batch.token_ids[s];
    out.positions[s] = batch.positions[s];
    out.slot_mapping[s] = batch.slot_mapping[s];
    out.context_lens[s] = batch.positions[s] + 1;
    std::copy_n(batch.block_tables.begin() + static_cast<std::ptrdiff_t>(s * source_width),
                source_width, out.block_tables.begin() + static_cast<std::ptrdiff_t>(s * width));
  }
}

}  // namespace lm
