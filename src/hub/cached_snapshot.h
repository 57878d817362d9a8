// What a snapshot folder of the cache holds for serving, judged without the network (offline
// mode, or the Hub unreachable): config.json, tokenizer.json and complete weights (every shard
// an index names, else some top-level weight file). Dangling links (blob gone) count as missing.
#pragma once

#include <string>
#include <vector>

#include "hub/file_selection.h"

namespace lm::hub {

struct SnapshotContents {
  std::vector<std::string> missing;  // file names, or a description when no weights are there
  WeightFormat format = WeightFormat::kNone;
  std::vector<std::string> weight_files;  // present weight files (shards, or filtered files)
};

SnapshotContents inspect_snapshot(const std::string& snapshot_dir);

// Every file of a snapshot folder by its path in the repository, subfolders included, sorted:
// `listed` has dangling links too, `present` only what is (or links to) a file.
struct SnapshotFiles {
  std::vector<std::string> listed;
  std::vector<std::string> present;
};
SnapshotFiles snapshot_files(const std::string& snapshot_dir);

}  // namespace lm::hub
