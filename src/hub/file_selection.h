// Which files of a repository a text-generation server needs: the config and tokenizer files it
// has, and the weights, chosen as TGI chooses them (safetensors first; PyTorch .bin only when a
// repository has no safetensors, for conversion).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace lm::hub {

inline constexpr std::string_view kSafetensorsIndex = "model.safetensors.index.json";
inline constexpr std::string_view kPytorchIndex = "pytorch_model.bin.index.json";

// Fetched with the weights whenever the repository has them.
std::vector<std::string> metadata_files(const std::vector<std::string>& repo_files);

// TGI's filter: a top-level `*{extension}` whose name contains none of "arguments", "args",
// "training".
bool is_weight_file(std::string_view name, std::string_view extension);

enum class WeightFormat { kNone, kSafetensors, kPytorch };

struct WeightSelection {
  WeightFormat format = WeightFormat::kNone;
  // Set when the repository has the format's index: its shards are then the weights, not `files`.
  std::optional<std::string> index_file;
  std::vector<std::string> files;  // the filtered weight files (used when there is no index)
};
WeightSelection select_weight_files(const std::vector<std::string>& repo_files);

// The shard files an index's `weight_map` names, sorted and unique; each must be a plain
// top-level file name.
Result<std::vector<std::string>> index_shard_files(std::string_view index_json,
                                                   std::string_view index_name);

}  // namespace lm::hub
