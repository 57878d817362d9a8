// TGI's generate routes: POST /generate, /generate_stream, / (compat, `stream` in the body) and
// /invocations (generate-shaped bodies). Parses the body on the HTTP thread, hands it to admission
// (admission/admission.h) and answers through TokenSinks: SSE events, or one JSON body (best_of).
#pragma once

#include <memory>

#include "server/state/server_state.h"
#include "server/transport/http_types.h"

namespace lm {

enum class GenerateRoute { kGenerate, kGenerateStream, kCompat };

void handle_generate(ServerState& state, HttpRequest request,
                     std::shared_ptr<ResponseStream> response, GenerateRoute route);

}  // namespace lm
