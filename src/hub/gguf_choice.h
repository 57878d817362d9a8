// Which GGUF file of a Hub repository to serve, chosen as llama.cpp's `-hf org/repo[:quant]` and
// `--hf-file` choose (common/download.cpp, find_best_model): a named file (case-insensitive),
// else the model file whose name carries the quant tag (":Q4_K_M" -> "...Q4_K_M.gguf" or
// "...Q4_K_M-00001-of-00002.gguf", case-insensitive), else Q4_K_M, then Q8_0, then the first
// model file. mmproj / imatrix / draft-model files are never the model. A split model (gguf-split
// names) brings all its shards.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace lm::hub {

struct GgufRequest {
  std::optional<std::string> file;   // --gguf-file / GGUF_FILE
  std::optional<std::string> quant;  // the `:QUANT` of --model-id
};

// "org/name:Q4_K_M" -> {"org/name", "Q4_K_M"}; an id without ':' has no tag.
std::pair<std::string, std::optional<std::string>> split_quant_tag(std::string_view model_id);

// A .gguf file that holds a language model (not a projector, imatrix or draft model).
bool is_gguf_model_file(std::string_view path);

// Whether a repository (its file names) is served from GGUF: when a file or quant is asked for,
// or when it has GGUF model files and no safetensors weights (safetensors win otherwise, as in
// TGI).
bool serves_gguf(const std::vector<std::string>& repo_files, const GgufRequest& request);

// The files to fetch and load: the chosen file, or every shard of a split model, first shard
// first. Errors list the repository's .gguf files: nothing matches, more than one file matches,
// a later shard was named, or a shard is missing.
Result<std::vector<std::string>> choose_gguf_files(std::vector<std::string> repo_files,
                                                   const GgufRequest& request,
                                                   std::string_view repo_id);

}  // namespace lm::hub
