// TGI's validation rules and messages for one generation (see validation.h).
#include "server/admission/validation.h"

#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

#include "server/wire/serde_json_reader.h"

namespace lm {
namespace {

uint64_t random_seed() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return generator();
}

}  // namespace

std::optional<ApiError> validate_before_permit(const GenerateParameters& p,
                                               const ValidationLimits& limits, bool streaming) {
  const uint64_t best_of = p.best_of.value_or(1);
  if (streaming) {
    if (best_of != 1) {
      return validation_error("`best_of` != 1 is not supported when streaming tokens");
    }
    if (p.decoder_input_details) {
      return validation_error(
          "`decoder_input_details` == true is not supported when streaming tokens");
    }
    return std::nullopt;
  }
  // TGI's validate_best_of only runs for best_of > 1, so 0 passes (and behaves as 1).
  if (best_of > 1) {
    if (limits.max_best_of == 1)
      return validation_error("`best_of` != 1 is not allowed for this endpoint");
    if (best_of > limits.max_best_of) {
      return validation_error("`best_of` must be > 0 and <= " + std::to_string(limits.max_best_of) +
                              ". Given: " + std::to_string(best_of));
    }
  }
  return std::nullopt;
}

std::variant<ValidGenerateRequest, ApiError> validate_parameters(ParsedGenerateRequest request,
                                                                 const ValidationLimits& limits,
                                                                 bool streaming) {
  GenerateParameters& p = request.parameters;
  // Fail closed: a caller asking for a watermark must not get unwatermarked text back as if it
  // were watermarked (TGI's processor is not built here; --watermark-gamma/-delta are refused).
  if (p.watermark) {
    return validation_error(
        "`watermark` == true is not supported: this server has no watermarking logits processor");
  }
  // Fail closed as well: TGI serves an unknown adapter with the base model, silently; a caller
  // naming one must not get the base model's text as if it were the adapter's.
  if (p.adapter_id) {
    return validation_error("`adapter_id` `" + *p.adapter_id +
                            "` is not loaded: this server serves no LoRA adapters");
  }
  ValidGenerateRequest v;
  v.best_of = p.best_of.value_or(1);
  const bool sampling = p.do_sample || p.temperature || p.top_k || p.top_p || p.typical_p;
  if (v.best_of > 1 && !sampling) {
    return validation_error("you must use sampling when `best_of` is > 1");
  }
  v.temperature = p.temperature.value_or(1.0f);
  if (v.temperature <= 0.0f) return validation_error("`temperature` must be strictly positive");
  v.repetition_penalty = p.repetition_penalty.value_or(1.0f);
  if (v.repetition_penalty <= 0.0f) {
    return validation_error("`repetition_penalty` must be strictly positive");
  }
  v.frequency_penalty = p.frequency_penalty.value_or(0.0f);
  if (!(v.frequency_penalty >= -2.0f && v.frequency_penalty <= 2.0f)) {
    return validation_error("`frequency_penalty` must be >= -2.0 and <= 2.0");
  }
  if (p.top_p) {
    if (*p.top_p <= 0.0f || *p.top_p >= 1.0f) {
      return validation_error("`top_p` must be > 0.0 and < 1.0");
    }
    v.top_p = *p.top_p;
  }
  if (p.typical_p) {
    if (*p.typical_p <= 0.0f || *p.typical_p >= 1.0f) {
      return validation_error("`typical_p` must be > 0.0 and < 1.0");
    }
    v.typical_p = *p.typical_p;
  }
  if (p.top_k) {
    if (*p.top_k <= 0) return validation_error("`top_k` must be strictly positive");
    v.top_k = static_cast<uint32_t>(*p.top_k);
  }
  if (p.max_new_tokens == 0u) return validation_error("`max_new_tokens` must be strictly positive");
  if (p.stop.size() > limits.max_stop_sequences) {
    return validation_error("`stop` supports up to " + std::to_string(limits.max_stop_sequences) +
                            " stop sequences. Given: " + std::to_string(p.stop.size()));
  }
  if (p.seed) {
    if (v.best_of > 1) return validation_error("`seed` must not be set when `best_of` > 1");
    v.seed = *p.seed;
    v.seed_given = true;
  } else {
    v.seed = random_seed();
  }
  if (p.top_n_tokens) {
    if (*p.top_n_tokens > limits.max_top_n_tokens) {
      return validation_error(
          "`top_n_tokens` must be >= 0 and <= " + std::to_string(limits.max_top_n_tokens) +
          ". Given: " + std::to_string(*p.top_n_tokens));
    }
    v.top_n_tokens = *p.top_n_tokens;
  }
  if (request.inputs.empty()) return validation_error("`inputs` cannot be empty");
  if (p.truncate && (*p.truncate == 0 || *p.truncate > limits.max_input_tokens)) {
    return validation_error("`truncate` must be strictly positive and less than " +
                            std::to_string(limits.max_input_tokens) +
                            ". Given: " + std::to_string(*p.truncate));
  }
  v.inputs = std::move(request.inputs);
  v.stream = streaming;
  v.do_sample = p.do_sample;
  v.watermark = p.watermark;
  v.stop = std::move(p.stop);
  v.requested_max_new_tokens = p.max_new_tokens;
  v.truncate = p.truncate;
  v.return_full_text = p.return_full_text;
  v.details = p.details;
  v.decoder_input_details = p.decoder_input_details;
  v.grammar = std::move(p.grammar);
  return v;
}

namespace {

// TGI's checks on a grammar that need no compiler, and the spec to compile: a JSON value (or a
// string holding JSON) must be an object with a top-level `properties`. The compiler's own
// errors (an invalid schema or regex) come at admission, as `grammar is not valid: ...`.
std::variant<GrammarSpec, ApiError> grammar_spec_of(const GrammarParameter& grammar) {
  if (grammar.type == kAnyJsonObjectGrammar) return GrammarSpec{GrammarKind::kJsonObject, ""};
  if (grammar.type == kToolCallsGrammar)
    return GrammarSpec{GrammarKind::kJsonSchema, grammar.value_json};
  // Ordered: a schema's property order is the order the output's keys are generated in.
  nlohmann::ordered_json value = nlohmann::ordered_json::parse(grammar.value_json, nullptr, false);
  if (grammar.type == "regex") return GrammarSpec{GrammarKind::kRegex, value.get<std::string>()};
  if (grammar.type == "json_schema") value = value["schema"];
  if (value.is_string()) {
    // serde_json::from_str::<Value>, so the message is serde's.
    const std::string text = value.get<std::string>();
    SerdeJsonReader reader(text);
    std::string raw;
    if (!reader.read_raw(raw) || !reader.read_end()) {
      return validation_error("grammar is not valid: " + reader.error().message);
    }
    value = nlohmann::ordered_json::parse(raw, nullptr, false);
  }
  if (!value.is_object()) return validation_error("grammar is not supported");
  if (!value.contains("properties")) {
    return validation_error("grammar is not valid: Grammar must have a 'properties' field");
  }
  return GrammarSpec{GrammarKind::kJsonSchema, value.dump()};
}

}  // namespace

std::optional<ApiError> validate_lengths(ValidGenerateRequest& request, size_t num_input_tokens,
                                         const ValidationLimits& limits) {
  uint64_t input_length = num_input_tokens;
  if (request.truncate) input_length = std::min<uint64_t>(input_length, *request.truncate);
  uint64_t total_new = 0;
  if (request.requested_max_new_tokens) {
    total_new = *request.requested_max_new_tokens;
  } else {
    total_new = limits.max_total_tokens > input_length ? limits.max_total_tokens - input_length : 0;
  }
  // NOTE: only the first piece is checked against max_total_tokens (TGI #3016); the message
  // reports the piece, not what was asked for.
  const uint64_t piece = std::min<uint64_t>(total_new, kMaxNewTokensPerPiece);
  if (input_length + piece > limits.max_total_tokens) {
    return validation_error(
        "`inputs` tokens + `max_new_tokens` must be <= " + std::to_string(limits.max_total_tokens) +
        ". Given: " + std::to_string(input_length) + " `inputs` tokens and " +
        std::to_string(piece) + " `max_new_tokens`");
  }
  if (input_length > limits.max_input_tokens) {
    return validation_error("`inputs` must have less than " +
                            std::to_string(limits.max_input_tokens) +
                            " tokens. Given: " + std::to_string(input_length));
  }
  if (request.grammar) {
    if (!limits.grammar_support) return validation_error("grammar is not supported");
    auto spec_or = grammar_spec_of(*request.grammar);
    if (auto* error = std::get_if<ApiError>(&spec_or)) return std::move(*error);
    request.grammar_spec = std::move(std::get<GrammarSpec>(spec_or));
  }
  request.input_length = static_cast<uint32_t>(input_length);
  request.max_new_tokens = static_cast<uint32_t>(piece);
  request.max_total_new_tokens = static_cast<uint32_t>(std::min<uint64_t>(total_new, UINT32_MAX));
  return std::nullopt;
}

SamplingParams sampling_params_of(const ValidGenerateRequest& v, float presence_penalty) {
  SamplingParams p;
  p.do_sample = v.do_sample;
  p.temperature = v.temperature;
  p.top_k = static_cast<int32_t>(v.top_k);
  p.top_p = v.top_p;
  p.typical_p = v.typical_p;
  p.repetition_penalty = v.repetition_penalty;
  p.frequency_penalty = v.frequency_penalty;
  p.presence_penalty = presence_penalty;
  p.seed = v.seed;
  p.top_n_tokens = static_cast<int32_t>(v.top_n_tokens);
  return p;
}

}  // namespace lm
