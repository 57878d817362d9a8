// A model split by llama.cpp's gguf-split: files NAME-00001-of-0000N.gguf ..
// NAME-0000N-of-0000N.gguf, each a GGUF file with its own tensor infos and data, the model's
// metadata in the first, and in every one `split.no` (0-based), `split.count` and
// `split.tensors.count` (all shards' tensors). GgufFile::open of the first shard opens the others
// beside it and binds all their tensors, so the config, vocabulary and weight readers see one file.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "loader/gguf_file.h"

namespace lm {

inline constexpr const char* kGgufSplitNo = "split.no";
inline constexpr const char* kGgufSplitCount = "split.count";
inline constexpr const char* kGgufSplitTensorsCount = "split.tensors.count";

// gguf-split's name of shard `shard_idx` (0-based) of `num_shards`: "{prefix}-%05d-of-%05d.gguf".
std::string gguf_split_path(const std::string& prefix, int64_t shard_idx, int64_t num_shards);

// `first` unchanged when it is not split (no split.count, or 1); else `first` with the tensors
// of every other shard. An Error names the file at fault: a shard other than the first was
// given, a shard is missing or disagrees on split.count / split.no, a tensor name repeats, or
// the tensors found differ from split.tensors.count.
Result<GgufFile> join_gguf_split(GgufFile first);

}  // namespace lm
