#include "hub/file_selection.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <tuple>

namespace lm::hub {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool contains(const std::vector<std::string>& files, std::string_view name) {
  return std::find(files.begin(), files.end(), name) != files.end();
}

}  // namespace

std::vector<std::string> metadata_files(const std::vector<std::string>& repo_files) {
  static constexpr std::string_view kMetadata[] = {
      "config.json",           "generation_config.json",  "tokenizer.json",
      "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
      "chat_template.json",    "chat_template.jinja"};
  std::vector<std::string> out;
  for (std::string_view name : kMetadata) {
    if (contains(repo_files, name)) out.emplace_back(name);
  }
  // transformers' named templates: additional_chat_templates/<name>.jinja (one level only).
  constexpr std::string_view kTemplateDir = "additional_chat_templates/";
  for (const std::string& name : repo_files) {
    if (name.starts_with(kTemplateDir) && ends_with(name, ".jinja") &&
        name.find('/', kTemplateDir.size()) == std::string::npos)
      out.push_back(name);
  }
  return out;
}

bool is_weight_file(std::string_view name, std::string_view extension) {
  return ends_with(name, extension) && name.find('/') == std::string_view::npos &&
         name.find("arguments") == std::string_view::npos &&
         name.find("args") == std::string_view::npos &&
         name.find("training") == std::string_view::npos;
}

WeightSelection select_weight_files(const std::vector<std::string>& repo_files) {
  WeightSelection s;
  for (const auto& [format, extension, index] :
       {std::tuple{WeightFormat::kSafetensors, ".safetensors", kSafetensorsIndex},
        std::tuple{WeightFormat::kPytorch, ".bin", kPytorchIndex}}) {
    for (const std::string& name : repo_files) {
      if (is_weight_file(name, extension)) s.files.push_back(name);
    }
    if (s.files.empty()) continue;
    s.format = format;
    std::sort(s.files.begin(), s.files.end());
    if (contains(repo_files, index)) s.index_file = std::string(index);
    return s;
  }
  return s;
}

Result<std::vector<std::string>> index_shard_files(std::string_view index_json,
                                                   std::string_view index_name) {
  const std::string where(index_name);
  nlohmann::json doc = nlohmann::json::parse(index_json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Error{where + " is not a JSON object"};
  auto map = doc.find("weight_map");
  if (map == doc.end() || !map->is_object() || map->empty())
    return Error{where + " has no weight_map"};
  std::set<std::string> shards;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) return Error{where + ": weight_map[\"" + tensor + "\"] is not a string"};
    const std::string name = file.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." ||
        name.find('\\') != std::string::npos) {
      return Error{where + " names the shard '" + name + "', which is not a plain file name"};
    }
    shards.insert(name);
  }
  return std::vector<std::string>(shards.begin(), shards.end());
}

}  // namespace lm::hub
