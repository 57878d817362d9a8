#include "runtime/request_check.h"

#include <string>

namespace lm {

Status check_request_fits_model(const ModelConfig& config, const EngineRequest& request) {
  for (int32_t id : request.prompt_ids) {
    if (id < 0 || id >= config.vocab_size) {
      return Error{"prompt token id " + std::to_string(id) + " is outside the vocabulary"};
    }
  }
  const auto total = static_cast<int64_t>(request.prompt_ids.size()) + request.max_new_tokens;
  if (total > config.max_context()) {
    return Error{"prompt (" + std::to_string(request.prompt_ids.size()) +
                 " tokens) + max_new_tokens (" + std::to_string(request.max_new_tokens) +
                 ") exceeds the model's context of " + std::to_string(config.max_context()) +
                 " tokens"};
  }
  return {};
}

}  // namespace lm
