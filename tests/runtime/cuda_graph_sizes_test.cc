// TGI's --cuda-graphs list and the captured size a decode step replays.
#include "runtime/cuda_graph_sizes.h"

#include <gtest/gtest.h>

namespace lm {
namespace {

using Sizes = std::vector<int64_t>;

TEST(CudaGraphSizes, DefaultIsTgisListAndOffForBitsandbytesAndExl2) {
  EXPECT_EQ(*parse_cuda_graph_sizes(std::nullopt, std::nullopt), (Sizes{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(*parse_cuda_graph_sizes(std::nullopt, "gptq"), (Sizes{1, 2, 4, 8, 16, 32}));
  EXPECT_TRUE(parse_cuda_graph_sizes(std::nullopt, "bitsandbytes-nf4")->empty());
  EXPECT_TRUE(parse_cuda_graph_sizes(std::nullopt, "exl2")->empty());
  // An explicit list wins over that rule, as in TGI.
  EXPECT_EQ(*parse_cuda_graph_sizes("4", "bitsandbytes"), (Sizes{4}));
}

TEST(CudaGraphSizes, ZerosAreDroppedAndTheListIsSortedAndDistinct) {
  EXPECT_TRUE(parse_cuda_graph_sizes("0", std::nullopt)->empty());
  EXPECT_EQ(*parse_cuda_graph_sizes("8, 1,0,4,8", std::nullopt), (Sizes{1, 4, 8}));
}

TEST(CudaGraphSizes, AnEntryThatIsNoSizeIsNamed) {
  for (const char* bad : {"1,x", "1,,2", "-1", "2.5", ""}) {
    auto sizes = parse_cuda_graph_sizes(std::string(bad), std::nullopt);
    ASSERT_FALSE(sizes.ok()) << bad;
    EXPECT_NE(sizes.error().message.find("--cuda-graphs"), std::string::npos);
  }
}

TEST(CudaGraphSizes, AStepReplaysTheSmallestSizeThatHoldsIt) {
  const Sizes sizes{1, 2, 4, 8, 16, 32};
  EXPECT_EQ(cuda_graph_size_for(sizes, 1), 1);
  EXPECT_EQ(cuda_graph_size_for(sizes, 3), 4);
  EXPECT_EQ(cuda_graph_size_for(sizes, 32), 32);
  EXPECT_EQ(cuda_graph_size_for(sizes, 33), std::nullopt);
  EXPECT_EQ(cuda_graph_size_for(Sizes{}, 1), std::nullopt);
}

}  // namespace
}  // namespace lm
