// The OpenAI-compatible routes: POST /v1/chat/completions, /v1/completions, /chat_tokenize, and
// /invocations (SageMaker), which dispatches by body shape to generate, chat or completions.
// Errors before generation are JSON bodies with their HTTP status (also when streaming).
#pragma once

#include <memory>

#include "server/state/server_state.h"
#include "server/transport/http_types.h"

namespace lm {

void handle_chat_completions(ServerState& state, HttpRequest request,
                             std::shared_ptr<ResponseStream> response);
void handle_completions(ServerState& state, HttpRequest request,
                        std::shared_ptr<ResponseStream> response);
void handle_chat_tokenize(ServerState& state, HttpRequest request,
                          std::shared_ptr<ResponseStream> response);
void handle_invocations(ServerState& state, HttpRequest request,
                        std::shared_ptr<ResponseStream> response);

}  // namespace lm
