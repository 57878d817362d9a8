// The route table of the TGI-compatible HTTP API: method + path -> handler, with TGI's API-key
// check on generation routes, CORS, JSON content-type checks, 404 for unknown paths and 405 for
// known paths with another method.
#pragma once

#include "server/state/server_state.h"
#include "server/transport/http_types.h"

namespace lm {

// The handler the HttpServer calls for every request. `state` must outlive it.
HttpHandler make_router(ServerState& state);

}  // namespace lm
