// TGI's /generate-shaped request bodies: parsing with axum/serde's rejections (400/422
// text/plain), then validation with TGI's exact messages, split around tokenization:
// validate_before_permit -> (concurrency permit) -> validate_parameters -> tokenizer ->
// validate_lengths.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/sampling_params.h"
#include "server/api_error.h"

namespace lm {

// `parameters.grammar`: {"type": ..., "value": ...}.
struct GrammarParameter {
  std::string type;        // "json" (also for the alias "json_object"), "regex" or "json_schema"
  std::string value_json;  // raw JSON text of `value`
};

// GenerateParameters as sent (serde defaults applied, nothing validated yet).
struct GenerateParameters {
  std::optional<uint64_t> best_of;
  std::optional<float> temperature;
  std::optional<float> repetition_penalty;
  std::optional<float> frequency_penalty;
  std::optional<int32_t> top_k;
  std::optional<float> top_p;
  std::optional<float> typical_p;
  bool do_sample = false;
  std::optional<uint32_t> max_new_tokens;  // nullopt: automatic (spec §1.4)
  std::optional<bool> return_full_text;
  std::vector<std::string> stop;
  std::optional<uint64_t> truncate;
  bool watermark = false;
  bool details = false;
  bool decoder_input_details = false;
  std::optional<uint64_t> seed;
  std::optional<uint32_t> top_n_tokens;
  std::optional<GrammarParameter> grammar;
  std::optional<std::string> adapter_id;
};

// The parameters TGI uses when the `parameters` key is absent: sampling on (since v1.4.0).
GenerateParameters default_generate_parameters();

enum class GenerateBody {
  kGenerate,  // GenerateRequest: /generate, /generate_stream, /tokenize
  kCompat,    // CompatGenerateRequest: POST / and /invocations, with `stream`
};

struct ParsedGenerateRequest {
  std::string inputs;
  GenerateParameters parameters;
  bool stream = false;  // only read from kCompat bodies
};

// A rejection by the JSON extractor, before any TGI code: text/plain, not ApiError JSON.
struct BodyRejection {
  int status = 400;  // 400 malformed JSON, 422 wrong shape
  std::string
      body;  // "Failed to parse the request body as JSON: ..." / "Failed to deserialize ..."
};
inline constexpr std::string_view kTextPlain = "text/plain; charset=utf-8";
// axum's other extractor rejections, for the route layer.
inline constexpr std::string_view kMissingJsonContentType =
    "Expected request with `Content-Type: application/json`";  // 415
inline constexpr std::string_view kPayloadTooLarge =
    "Failed to buffer the request body: length limit exceeded";  // 413
// /invocations when the body is none of generate/chat/completions (422 text/plain).
inline constexpr std::string_view kSagemakerNoMatch =
    "Failed to deserialize the JSON body into the target type: data did not match any variant "
    "of untagged enum SagemakerRequest";

// Trailing bytes after the JSON value are ignored, as axum 0.7 does.
std::variant<ParsedGenerateRequest, BodyRejection> parse_generate_request(std::string_view body,
                                                                          GenerateBody shape);

struct ValidationLimits {
  size_t max_best_of = 2;
  size_t max_stop_sequences = 4;
  uint32_t max_top_n_tokens = 5;
  size_t max_input_tokens = 4095;
  size_t max_total_tokens = 4096;
  // TGI compiles JSON grammars to regexes; without that machinery every grammar is refused with
  // TGI's `--disable-grammar-support` message.
  bool grammar_support = false;
};

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
  std::optional<std::string> adapter_id;
  // Set by validate_lengths:
  uint32_t input_length = 0;          // prompt tokens after truncation
  uint32_t max_new_tokens = 0;        // this piece: min(requested or automatic, 1024)
  uint32_t max_total_new_tokens = 0;  // the whole request (continuation target)
};

// The handler checks TGI runs before taking a concurrency permit: on streams, best_of != 1 and
// decoder_input_details; otherwise best_of > 1 against max_best_of.
std::optional<ApiError> validate_before_permit(const ParsedGenerateRequest& request,
                                               const ValidationLimits& limits, bool streaming);

// Every rule that needs no token count, in TGI's order (first failure wins).
std::variant<ValidGenerateRequest, ApiError> validate_parameters(ParsedGenerateRequest request,
                                                                 const ValidationLimits& limits,
                                                                 bool streaming);

// After tokenizing `request.inputs` (with special tokens) into num_input_tokens: the length
// rules, automatic max_new_tokens and the 1024-token piece size, then grammar.
std::optional<ApiError> validate_lengths(ValidGenerateRequest& request, size_t num_input_tokens,
                                         const ValidationLimits& limits);

// The engine's sampling parameters for a validated request. `presence_penalty` is OpenAI's (the
// native TGI routes have none).
SamplingParams sampling_params_of(const ValidGenerateRequest& request,
                                  float presence_penalty = 0.0f);

}  // namespace lm
