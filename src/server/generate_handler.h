// TGI's generate routes: POST /generate, /generate_stream, / (compat, `stream` in the body) and
// /invocations (generate-shaped bodies). Parses and validates on the HTTP thread, takes a
// concurrency permit, tokenizes, submits to the engine and answers through a TokenSink.
#pragma once

#include <memory>

#include "server/http_types.h"
#include "server/server_state.h"

namespace lm {

enum class GenerateRoute { kGenerate, kGenerateStream, kCompat };

void handle_generate(ServerState& state, HttpRequest request,
                     std::shared_ptr<ResponseStream> response, GenerateRoute route);

}  // namespace lm
