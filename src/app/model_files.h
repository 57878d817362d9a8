// Finds the files to load for --model-id: a local folder or .gguf file as is, or a Hub
// repository's snapshot in the huggingface_hub cache (fetched when files are missing; for a
// repository of GGUF files, the chosen file and its shards), and the
// tokenizer that belongs to a model path: the vocabulary embedded in a GGUF file, or
// tokenizer.json (+ tokenizer_config.json) in a Hugging Face folder.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "hub/model_resolver.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

namespace lm {

struct ModelFilesRequest {
  std::string model_id;
  std::optional<std::string> revision;
  std::optional<std::string> huggingface_hub_cache;     // --huggingface-hub-cache
  std::optional<std::string> weights_cache_override;    // --weights-cache-override
  std::optional<std::string> gguf_file = std::nullopt;  // --gguf-file
};

// Resolves (and downloads) the model; the Hub settings come from the environment (HF_ENDPOINT,
// HF_TOKEN, HF_HUB_OFFLINE, ...). `path` of the result is what LlamaModel::load takes.
Result<hub::ResolvedModel> find_model_files(const ModelFilesRequest& request);

Result<std::unique_ptr<Tokenizer>> load_tokenizer_for(const std::string& model_path,
                                                      const LlamaModel& model);

}  // namespace lm
