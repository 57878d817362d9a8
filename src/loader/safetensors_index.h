// model.safetensors.index.json, the map of a sharded safetensors checkpoint: which shard file
// holds each tensor. Read as hostile input: every shard must be a plain file name in the folder.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace lm {

struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
  std::vector<std::string> shard_names;  // each shard once, in the order weight_map names them
};

// `label` (the index's path) names it in errors. Needs an object "weight_map" of strings, none
// empty or holding '/' or "..".
Result<SafetensorsIndex> parse_safetensors_index(std::string_view json, const std::string& label);

}  // namespace lm
