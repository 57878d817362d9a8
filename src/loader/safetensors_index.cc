#include "loader/safetensors_index.h"

#include <nlohmann/json.hpp>
#include <set>

namespace lm {

Result<SafetensorsIndex> parse_safetensors_index(std::string_view json, const std::string& label) {
  const auto index = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  const auto map = index.is_object() ? index.find("weight_map") : index.end();
  if (index.is_discarded() || !index.is_object() || map == index.end() || !map->is_object()) {
    return Error{label + ": not a safetensors index (needs an object \"weight_map\")"};
  }
  SafetensorsIndex out;
  std::set<std::string> unique;
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string()) return Error{label + ": weight_map['" + name + "'] is not a file name"};
    auto shard = file.get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos ||
        shard.find("..") != std::string::npos) {
      return Error{label + ": shard name '" + shard + "' must be a plain file name"};
    }
    if (unique.insert(shard).second) out.shard_names.push_back(shard);
    out.weight_map.emplace(name, std::move(shard));
  }
  return out;
}

}  // namespace lm
