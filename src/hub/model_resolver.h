// Turns --model-id into something to load. A local folder or file is used as is; a Hub id
// (org/name at a revision, default main) is looked up in the huggingface_hub cache and fetched
// from the Hub when files are missing; WEIGHTS_CACHE_OVERRIDE names a folder that replaces the
// cache; HF_HUB_OFFLINE uses the cache alone. Logs as TGI's download-weights does. A repository
// of GGUF files (org/name:QUANT, --gguf-file, or no safetensors) serves one GGUF file, or all
// shards of a split one, chosen as llama.cpp's -hf does (gguf_choice.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "hub/hub_options.h"

namespace lm::hub {

struct ModelRequest {
  std::string model_id;
  std::optional<std::string> revision;                  // branch, tag, commit or refs/pr/N
  std::optional<std::string> weights_cache_override;    // WEIGHTS_CACHE_OVERRIDE
  std::optional<std::string> gguf_file = std::nullopt;  // --gguf-file: the GGUF file to serve
};

struct ResolvedModel {
  // The folder (snapshots/{commit} for a Hub id) or file to load: for a GGUF repository, the
  // chosen file in the snapshot (a split model's first shard, the others beside it).
  std::string path;
  // Set for a Hub id: the id, the commit the revision resolved to, and the Hub's pipeline tag
  // (unknown offline).
  std::optional<std::string> repo_id;
  std::optional<std::string> commit_sha;
  std::optional<std::string> pipeline_tag;
  // Paths of PyTorch .bin weights in `path` when the repository (or local folder) has no
  // safetensors: they need converting to safetensors (next to them) before the model can load.
  std::vector<std::string> pytorch_files;
  bool downloaded = false;  // some file came over the network in this call
};

Result<ResolvedModel> resolve_model(const ModelRequest& request, const HubOptions& options);

}  // namespace lm::hub
