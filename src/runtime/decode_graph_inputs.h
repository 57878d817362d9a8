// A decode step's flat inputs laid out in a fixed shape: every sequence one new token whose
// logits are wanted, padded to a captured CUDA graph's batch size and block-table width. A
// padding row reads token 0 at position 0 through block 0 (reserved: never a sequence's) and
// stores nothing (slot -1), so it touches no sequence's K/V. Plain data, tested on the CPU.
#pragma once

#include <cstdint>
#include <vector>

#include "model/batch_input.h"

namespace lm {

struct DecodeGraphShape {
  int64_t num_seqs = 0;            // rows of the captured forward (>= the step's sequences)
  int64_t max_blocks_per_seq = 0;  // width of its block tables
};

struct DecodeGraphInputs {
  std::vector<int32_t> token_ids;     // [num_seqs]
  std::vector<int32_t> positions;     // [num_seqs]
  std::vector<int64_t> slot_mapping;  // [num_seqs]; -1 on padding rows
  std::vector<int32_t> context_lens;  // [num_seqs]: position + 1 (1 on padding rows)
  std::vector<int32_t> block_tables;  // [num_seqs, max_blocks_per_seq], padded with block 0
};

// True when every sequence of `batch` has exactly one token and the logits rows are those
// tokens in order: the step decode attention and a decode graph can run.
bool is_pure_decode(const BatchInput& batch);

// Fills `out` (reusing its memory) for a pure-decode `batch` in `shape`, which must hold it.
void fill_decode_graph_inputs(const BatchInput& batch, const DecodeGraphShape& shape,
                              DecodeGraphInputs& out);

}  // namespace lm
