// Finds the tokenizer that belongs to a model path: the vocabulary embedded in a GGUF file, or
// tokenizer.json (+ tokenizer_config.json) in a Hugging Face folder.
#pragma once

#include <memory>

#include "base/result.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

namespace lm {

// A clear error for a --model-id that is neither a local folder nor a file (a Hub repository id:
// downloads come with their own issue).
Status check_local_model_path(const std::string& model_id);

Result<std::unique_ptr<Tokenizer>> load_tokenizer_for(const std::string& model_path,
                                                      const LlamaModel& model);

}  // namespace lm
