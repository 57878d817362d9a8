#include "hub/cached_snapshot.h"

#include <algorithm>
#include <filesystem>

#include "base/text_file.h"

namespace lm::hub {
namespace fs = std::filesystem;

SnapshotContents inspect_snapshot(const std::string& snapshot_dir) {
  SnapshotContents out;
  std::vector<std::string> entries;  // everything listed, dangling links included
  std::vector<std::string> present;  // entries that are (or link to) a file
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(snapshot_dir, ec)) {
    const std::string name = entry.path().filename().string();
    entries.push_back(name);
    if (fs::is_regular_file(entry.path(), ec)) present.push_back(name);
  }
  std::sort(present.begin(), present.end());
  auto has = [&](const std::string& name) {
    return std::binary_search(present.begin(), present.end(), name);
  };
  for (const char* required : {"config.json", "tokenizer.json"}) {
    if (!has(required)) out.missing.emplace_back(required);
  }
  const WeightSelection weights = select_weight_files(entries);
  out.format = weights.format;
  std::vector<std::string> wanted = weights.files;
  if (weights.index_file && !has(*weights.index_file)) {
    out.missing.push_back(*weights.index_file);
    return out;
  }
  if (weights.index_file) {
    auto text = read_text_file(snapshot_dir + "/" + *weights.index_file);
    if (!text.ok()) {
      out.missing.push_back(*weights.index_file);
      return out;
    }
    auto shards = index_shard_files(*text, *weights.index_file);
    if (!shards.ok()) {
      out.missing.push_back(*weights.index_file + " (" + shards.error().message + ")");
      return out;
    }
    wanted = *shards;
  }
  if (weights.format == WeightFormat::kNone) {
    out.missing.emplace_back("the model weights (*.safetensors)");
    return out;
  }
  for (const std::string& name : wanted) {
    if (has(name)) {
      out.weight_files.push_back(name);
    } else {
      out.missing.push_back(name);
    }
  }
  return out;
}

SnapshotFiles snapshot_files(const std::string& snapshot_dir) {
  SnapshotFiles out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(snapshot_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) continue;
    // Lexically: the entries are links into blobs/, which fs::relative would follow.
    const std::string name = it->path().lexically_relative(snapshot_dir).generic_string();
    out.listed.push_back(name);
    if (fs::is_regular_file(it->path(), ec)) out.present.push_back(name);
  }
  std::sort(out.listed.begin(), out.listed.end());
  std::sort(out.present.begin(), out.present.end());
  return out;
}

}  // namespace lm::hub
