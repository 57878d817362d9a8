#include "loader/gguf_split.h"

#include <fmt/format.h>

#include <filesystem>
#include <utility>

namespace lm {

std::string gguf_split_path(const std::string& prefix, int64_t shard_idx, int64_t num_shards) {
  return fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, shard_idx + 1, num_shards);
}

Result<GgufFile> join_gguf_split(GgufFile first) {
  const std::string path = first.path();
  LM_ASSIGN_OR_RETURN(auto count, first.get_int(kGgufSplitCount));
  LM_ASSIGN_OR_RETURN(auto no, first.get_int(kGgufSplitNo));
  if (!count || *count == 1) return first;
  // gguf-split writes at most 99999 shards (the %05d in the names).
  if (*count < 1 || *count > 99999) {
    return Error{fmt::format("{}: {} is {}, not a shard count", path, kGgufSplitCount, *count)};
  }
  if (no.value_or(0) != 0) {
    return Error{fmt::format(
        "{} is shard {} of {} of a split GGUF model: pass the first shard (…-00001-of-{:05d}.gguf)",
        path, *no + 1, *count, *count)};
  }
  LM_ASSIGN_OR_RETURN(auto num_tensors, first.get_int(kGgufSplitTensorsCount));
  if (!num_tensors)
    return Error{fmt::format("{}: split model without {}", path, kGgufSplitTensorsCount)};
  // NOTE: as llama.cpp, the other shards are found by name beside the first, so the first must
  // keep gguf-split's name.
  const std::string suffix = fmt::format("-{:05d}-of-{:05d}.gguf", 1, *count);
  if (path.size() <= suffix.size() ||
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return Error{fmt::format(
        "{} is the first of {} shards of a split GGUF model but its name does not end in {}, so "
        "the other shards cannot be found",
        path, *count, suffix)};
  }
  const std::string prefix = path.substr(0, path.size() - suffix.size());
  for (int64_t idx = 1; idx < *count; ++idx) {
    const std::string shard_path = gguf_split_path(prefix, idx, *count);
    std::error_code ec;
    if (!std::filesystem::exists(shard_path, ec)) {
      return Error{fmt::format("{}: missing shard {} of {} of the split GGUF model {}", shard_path,
                               idx + 1, *count, path)};
    }
    LM_ASSIGN_OR_RETURN(GgufFile shard, GgufFile::open_one(shard_path));
    LM_ASSIGN_OR_RETURN(auto shard_count, shard.get_int(kGgufSplitCount));
    LM_ASSIGN_OR_RETURN(auto shard_no, shard.get_int(kGgufSplitNo));
    if (shard_count != count) {
      return Error{
          fmt::format("{}: {} is {}, but the first shard {} says {}", shard_path, kGgufSplitCount,
                      shard_count ? std::to_string(*shard_count) : "absent", path, *count)};
    }
    if (shard_no != idx) {
      return Error{fmt::format("{}: {} is {}, expected {} for shard {} of {}", shard_path,
                               kGgufSplitNo, shard_no ? std::to_string(*shard_no) : "absent", idx,
                               idx + 1, *count)};
    }
    const auto shard_idx = static_cast<uint32_t>(first.shard_files_.size() + 1);
    for (GgufTensorInfo& info : shard.tensors_) {
      if (!first.tensor_idx_.emplace(info.name, first.tensors_.size()).second) {
        return Error{fmt::format("{}: tensor '{}' is also in an earlier shard of {}", shard_path,
                                 info.name, path)};
      }
      info.shard_idx = shard_idx;
      first.tensors_.push_back(std::move(info));
    }
    first.shard_files_.push_back(std::move(shard.file_));
  }
  if (static_cast<int64_t>(first.tensors_.size()) != *num_tensors) {
    return Error{fmt::format("{}: the {} shards hold {} tensors, but {} says {}", path, *count,
                             first.tensors_.size(), kGgufSplitTensorsCount, *num_tensors)};
  }
  return first;
}

}  // namespace lm
