// The one admission step of every generation route (TGI's /generate, /generate_stream, POST /,
// OpenAI chat and completions, /invocations): a route's request, mapped onto GenerateParameters,
// becomes either a fully valid, clamped, tokenized set of engine requests or one ApiError. Route
// handlers keep only their wire format: parsing their JSON shape and rendering responses.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/engine_request.h"
#include "engine/token_sink.h"
#include "server/admission/admission_request.h"
#include "server/admission/validation.h"
#include "server/state/server_state.h"
#include "server/wire/api_error.h"

namespace lm {

// One validated prompt.
struct AdmittedPrompt {
  ValidGenerateRequest valid;  // `inputs` is the prompt text (the template's, for chat)
  std::vector<int32_t> ids;    // prompt tokens, truncated to valid.input_length
  std::shared_ptr<const CompiledGrammar> grammar;  // valid.grammar_spec compiled (null: none)
};

// One sequence to run: a choice (OpenAI) or best_of candidate (TGI) of one prompt.
struct AdmittedGeneration {
  size_t prompt_idx = 0;    // into Admission::prompts
  uint64_t choice_idx = 0;  // within its prompt: 0 keeps the request's seed, the others draw theirs
  EngineRequest engine_request;           // max_new_tokens clamped to max_total_tokens
  std::optional<uint64_t> reported_seed;  // the seed responses show (random choices only)
};

struct Admission {
  std::shared_ptr<ConcurrencyPermit> permit;  // one unit per generation; the sinks hold it
  std::vector<AdmittedPrompt> prompts;
  std::vector<AdmittedGeneration> generations;  // prompt-major
};

struct AdmissionFailure {
  ApiError error;
  const char* metric_label = "";  // tgi_request_failure's label
};

// TGI's order, first failure wins: the checks before the permit (best_of, streams), the chat
// template, the concurrency permit (429), then per prompt the parameter rules, tokenization, the
// length rules (TGI's 1024-token piece among them), the grammar (compiled, through the cache:
// an invalid schema or regex fails here, before any generation) and the clamp to
// max_total_tokens. Records the
// accepted prompts' input length and max_new_tokens metrics.
std::variant<Admission, AdmissionFailure> admit(ServerState& state, AdmissionRequest request);

// Gives the admission's permit back as soon as `response`'s client hangs up, not when the engine
// next looks at its sequences: the client that takes its place must not meet a 429.
void release_permit_on_hang_up(const Admission& admission, ResponseStream& response);

// Submits every generation with the sink `make_sink` builds for it. make_sink runs here, before
// submit_all returns (it may capture the caller's locals by reference). A submit the engine
// refuses fails that sink and the others are still submitted: a best_of collector waits for an
// outcome from each (an OpenAI call fails once and cancels the rest). Each engine request is
// moved into the engine: afterwards only `prompts` and the generations' indices remain.
void submit_all(
    ServerState& state, Admission& admission,
    const std::function<std::shared_ptr<TokenSink>(const AdmittedGeneration&)>& make_sink);

}  // namespace lm
