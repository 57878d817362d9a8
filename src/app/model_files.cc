#include "app/model_files.h"

#include "base/text_file.h"
#include "loader/gguf_file.h"
#include "loader/gguf_vocab_reader.h"

#include <sys/stat.h>

namespace lm {

Status check_local_model_path(const std::string& model_id) {
  struct stat st {};
  if (::stat(model_id.c_str(), &st) == 0) return {};
  return Error{"model '" + model_id +
               "' is not a local folder or file; downloading from the Hugging Face Hub is not "
               "supported yet: pass "
               "--model-id a local model folder (config.json + safetensors) or a .gguf file"};
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer_for(const std::string& model_path,
                                                      const LlamaModel& model) {
  if (model.gguf()) {
    LM_ASSIGN_OR_RETURN(GgufVocab vocab, read_gguf_vocab(*model.gguf()));
    return Tokenizer::from_gguf_vocab(vocab);
  }
  const std::string json = model_path + "/tokenizer.json";
  if (!file_exists(json)) return Error{model_path + ": no tokenizer.json"};
  return Tokenizer::from_tokenizer_json(json, model_path + "/tokenizer_config.json");
}

}  // namespace lm
