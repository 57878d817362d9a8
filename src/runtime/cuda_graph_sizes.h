// TGI's --cuda-graphs: the decode batch sizes whose forward is captured once as a CUDA graph and
// replayed, and which captured size serves a decode step of n sequences (the smallest that holds
// them; the rows past n are padding). Plain data, tested on the CPU.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace lm {

// TGI's default list.
inline constexpr const char* kDefaultCudaGraphs = "1,2,4,8,16,32";

// The sizes, ascending and distinct, for the flag's value (comma separated; 0 entries dropped, so
// "0" turns graphs off). Unset: the default, or none with --quantize bitsandbytes* / exl2 (TGI's
// rule). Errors name the entry that is not a non-negative integer.
Result<std::vector<int64_t>> parse_cuda_graph_sizes(const std::optional<std::string>& flag,
                                                    const std::optional<std::string>& quantize);

// The smallest size >= num_seqs, or nullopt when none is (the step runs without a graph).
std::optional<int64_t> cuda_graph_size_for(std::span<const int64_t> sizes, int64_t num_seqs);

}  // namespace lm
