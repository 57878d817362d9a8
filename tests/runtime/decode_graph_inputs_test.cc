// A decode step padded to a captured graph's shape: real rows as given, padding rows inert.
#include "runtime/decode_graph_inputs.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

// Three sequences decoding one token each, block tables 2 wide.
struct ThreeDecodes {
  std::vector<int32_t> ids{11, 12, 13}, positions{4, 0, 9}, query_begins{0, 1, 2, 3};
  std::vector<int64_t> slots{21, 28, 57};
  std::vector<int32_t> tables{5, 0, 7, 0, 3, 4}, logit_rows{0, 1, 2};
  BatchInput view() const {
    return {ids, positions, slots, query_begins, tables, 2, logit_rows, {}};
  }
};

TEST(DecodeGraphInputs, PureDecodeIsOneTokenAndOneLogitsRowPerSequenceInOrder) {
  ThreeDecodes d;
  EXPECT_TRUE(is_pure_decode(d.view()));
  d.logit_rows = {0, 2, 1};
  EXPECT_FALSE(is_pure_decode(d.view()));
  d.logit_rows = {0, 1};
  EXPECT_FALSE(is_pure_decode(d.view()));
  // A prompt chunk of two tokens and one decode.
  ThreeDecodes p;
  p.query_begins = {0, 2, 3};
  p.tables = {5, 0, 7, 0};
  p.logit_rows = {1, 2};
  EXPECT_FALSE(is_pure_decode(p.view()));
}

TEST(DecodeGraphInputs, RealRowsKeepTheirInputsAndPaddingRowsReadBlockZeroAndStoreNothing) {
  ThreeDecodes d;
  DecodeGraphInputs in;
  fill_decode_graph_inputs(d.view(), {4, 3}, in);
  EXPECT_EQ(in.token_ids, (std::vector<int32_t>{11, 12, 13, 0}));
  EXPECT_EQ(in.positions, (std::vector<int32_t>{4, 0, 9, 0}));
  EXPECT_EQ(in.slot_mapping, (std::vector<int64_t>{21, 28, 57, -1}));
  EXPECT_EQ(in.context_lens, (std::vector<int32_t>{5, 1, 10, 1}));
  EXPECT_EQ(in.block_tables, (std::vector<int32_t>{5, 0, 0, 7, 0, 0, 3, 4, 0, 0, 0, 0}));
  // Refilled for the exact shape (no graph): the same rows, nothing padded.
  fill_decode_graph_inputs(d.view(), {3, 2}, in);
  EXPECT_EQ(in.block_tables, d.tables);
  EXPECT_EQ(in.context_lens, (std::vector<int32_t>{5, 1, 10}));
}

TEST(DecodeGraphInputsDeathTest, AShapeTooSmallIsABug) {
  ThreeDecodes d;
  DecodeGraphInputs in;
  EXPECT_DEATH(fill_decode_graph_inputs(d.view(), {2, 2}, in), "");
  EXPECT_DEATH(fill_decode_graph_inputs(d.view(), {4, 1}, in), "");
}

}  // namespace
}  // namespace lm
