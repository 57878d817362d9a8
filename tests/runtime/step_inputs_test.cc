// StepInputs with window placeholders: a table's leading entries may be block 0 (released blocks
// wholly before the sliding window, EngineConfig::kv_window_tokens); they pass to the model's
// block tables as they are, the positions a step writes must lie after them, and any other
// entry must be a real block.
#include "runtime/step_inputs.h"

#include <gtest/gtest.h>

#include <vector>

namespace lm {
namespace {

// A decoding sequence of 13 tokens (positions 0..12) whose first two blocks of 4 were released.
Sequence decoding_sequence() {
  EngineRequest request;
  for (int32_t i = 0; i < 13; ++i) request.prompt_ids.push_back(100 + i);
  request.max_new_tokens = 4;
  Sequence seq(7, request, nullptr);
  seq.num_computed_tokens = 12;
  seq.block_table = {0, 0, 3, 4};
  seq.num_released_blocks = 2;
  return seq;
}

ScheduledBatch batch_of(const Sequence& seq, int64_t num_placeholders) {
  ScheduledBatch batch;
  batch.sequences.push_back(ScheduledSequence{.sequence = &seq,
                                              .seq_id = seq.id,
                                              .first_position = 12,
                                              .num_tokens = 1,
                                              .samples = true,
                                              .block_table = seq.block_table,
                                              .num_placeholder_blocks = num_placeholders});
  return batch;
}

TEST(StepInputs, LeadingPlaceholdersPassThroughAndTheStepWritesAfterThem) {
  const Sequence seq = decoding_sequence();
  StepInputs inputs;
  inputs.build(batch_of(seq, 2), /*block_size=*/4, /*num_blocks=*/8);
  const BatchInput view = inputs.view();
  EXPECT_EQ(std::vector<int32_t>(view.block_tables.begin(), view.block_tables.end()),
            (std::vector<int32_t>{0, 0, 3, 4}));
  EXPECT_EQ(std::vector<int64_t>(view.slot_mapping.begin(), view.slot_mapping.end()),
            (std::vector<int64_t>{4 * 4 + 0}));  // position 12: block 4, row 0
}

TEST(StepInputsDeathTest, RejectsBlockZeroThatIsNotAPlaceholder) {
  const Sequence seq = decoding_sequence();
  StepInputs inputs;
  // The same table with no placeholders declared: block 0 where a real block must be.
  EXPECT_DEATH(inputs.build(batch_of(seq, 0), 4, 8), "");
  // Placeholders reaching the block the step writes into.
  EXPECT_DEATH(inputs.build(batch_of(seq, 4), 4, 8), "");
}

}  // namespace
}  // namespace lm
