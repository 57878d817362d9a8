// TGI's validation of one generation, with its exact messages, split around tokenization:
// validate_before_permit -> (concurrency permit) -> validate_parameters -> tokenizer ->
// validate_lengths. Only admission.cc calls these in a request's path; every route gets them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/sampling_params.h"
#include "grammar/grammar_spec.h"
#include "server/admission/generate_parameters.h"
#include "server/state/server_settings.h"
#include "server/wire/api_error.h"

namespace lm {

// TGI generates at most this many tokens per scheduled piece; longer requests continue silently.
inline constexpr uint32_t kMaxNewTokensPerPiece = 1024;

struct ValidGenerateRequest {
  std::string inputs;
  bool stream = false;
  // Sampling, with TGI's neutral values for absent fields.
  float temperature = 1.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  uint32_t top_k = 0;  // 0: disabled
  float top_p = 1.0f;
  float typical_p = 1.0f;
  bool do_sample = false;
  uint64_t seed = 0;        // the request's seed, or a random one (as TGI's router draws)
  bool seed_given = false;  // false: `seed` was drawn here
  bool watermark = false;
  std::vector<std::string> stop;
  std::optional<uint32_t> requested_max_new_tokens;  // as sent; nullopt: automatic
  std::optional<uint64_t> truncate;                  // keep the last `truncate` input tokens
  std::optional<bool> return_full_text;              // null: route default (false for /generate)
  bool details = false;
  bool decoder_input_details = false;
  uint32_t top_n_tokens = 0;
  uint64_t best_of = 1;  // > 1 only when asked for (0 behaves as 1)
  std::optional<GrammarParameter> grammar;
  // Set by validate_lengths:
  std::optional<GrammarSpec> grammar_spec;  // what `grammar` asks for, checked as TGI does
  uint32_t input_length = 0;                // prompt tokens after truncation
  uint32_t max_new_tokens = 0;              // this piece: min(requested or automatic, 1024)
  uint32_t max_total_new_tokens = 0;        // the whole request (continuation target)
};

// The checks TGI runs before taking a concurrency permit: on streams, best_of != 1 and
// decoder_input_details; otherwise best_of > 1 against max_best_of.
std::optional<ApiError> validate_before_permit(const GenerateParameters& parameters,
                                               const ValidationLimits& limits, bool streaming);

// Every rule that needs no token count, in TGI's order (first failure wins).
std::variant<ValidGenerateRequest, ApiError> validate_parameters(ParsedGenerateRequest request,
                                                                 const ValidationLimits& limits,
                                                                 bool streaming);

// After tokenizing `request.inputs` (with special tokens) into num_input_tokens: the length
// rules, automatic max_new_tokens and the 1024-token piece size, then grammar (TGI's checks;
// admission compiles the resulting grammar_spec).
std::optional<ApiError> validate_lengths(ValidGenerateRequest& request, size_t num_input_tokens,
                                         const ValidationLimits& limits);

// The engine's sampling parameters for a validated request. `presence_penalty` is OpenAI's (the
// native TGI routes have none).
SamplingParams sampling_params_of(const ValidGenerateRequest& request,
                                  float presence_penalty = 0.0f);

}  // namespace lm
