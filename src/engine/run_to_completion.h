// run_to_completion: submits one request to an Engine and blocks until it ends. For callers that
// hold one request at a time (the `generate` command, warm-up, tests), so they take the engine's
// one generation path and its finish rules instead of a loop of their own.
#pragma once

#include <functional>
#include <vector>

#include "base/result.h"
#include "engine/engine.h"
#include "engine/engine_request.h"
#include "engine/finish_reason.h"
#include "engine/sampled_token.h"

namespace lm {

struct GenerationResult {
  std::vector<SampleResult> tokens;
  FinishReason finish_reason = FinishReason::kLength;
};

// Sees each new token on the engine thread (so it must not block); returning false ends the
// request there, as a matched stop sequence does.
using TokenCallback = std::function<bool(const SampleResult&)>;

// Submits `request` to `engine` and waits for its end: the engine's finish reason (length, EOS)
// on the token that ended it, else kStopSequence when `on_token` returned false. Fails with the
// engine's message when submit refuses the request or the engine fails it.
Result<GenerationResult> run_to_completion(Engine& engine, EngineRequest request,
                                           TokenCallback on_token = {});

}  // namespace lm
