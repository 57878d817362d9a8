#include "runtime/cuda_graph_sizes.h"

#include <algorithm>
#include <charconv>
#include <string_view>

namespace lm {

Result<std::vector<int64_t>> parse_cuda_graph_sizes(const std::optional<std::string>& flag,
                                                    const std::optional<std::string>& quantize) {
  // NOTE: TGI leaves graphs off by default for bitsandbytes and exl2 weights, whose kernels it
  // cannot capture; we keep the same defaults so a manifest behaves the same.
  if (!flag && quantize && (quantize->starts_with("bitsandbytes") || *quantize == "exl2"))
    return std::vector<int64_t>{};
  const std::string text = flag ? *flag : kDefaultCudaGraphs;
  std::vector<int64_t> sizes;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view entry = rest.substr(0, comma);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    int64_t size = -1;
    const auto [end, error] = std::from_chars(entry.data(), entry.data() + entry.size(), size);
    if (entry.empty() || error != std::errc() || end != entry.data() + entry.size() || size < 0) {
      return Error{"--cuda-graphs " + text + ": '" + std::string(entry) +
                   "' is not a batch size (a comma-separated list of non-negative integers; 0 "
                   "turns CUDA graphs off)"};
    }
    if (size > 0) sizes.push_back(size);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::optional<int64_t> cuda_graph_size_for(std::span<const int64_t> sizes, int64_t num_seqs) {
  const auto it = std::lower_bound(sizes.begin(), sizes.end(), num_seqs);
  if (it == sizes.end()) return std::nullopt;
  return *it;
}

}  // namespace lm
