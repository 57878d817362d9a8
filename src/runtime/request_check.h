// The model-side checks every request passes before it runs (ModelExecutor::check_request; the
// `generate` command also asks before it sizes an engine): prompt ids inside the vocabulary,
// prompt + max_new_tokens inside the model's context.
#pragma once

#include "base/result.h"
#include "engine/engine_request.h"
#include "model/model_config.h"

namespace lm {

Status check_request_fits_model(const ModelConfig& config, const EngineRequest& request);

}  // namespace lm
