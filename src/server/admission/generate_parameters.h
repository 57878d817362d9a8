// The generation parameters every route is mapped onto: TGI's GenerateParameters as sent (serde
// defaults applied, nothing validated yet). The OpenAI routes fill the same struct (TGI's
// mapping), so admission validates one shape whatever the route.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lm {

// The type OpenAI's {"type": "json_object"} (no `value`: any JSON object) maps onto; TGI's own
// wire format has no way to send it.
inline constexpr const char* kAnyJsonObjectGrammar = "any_json_object";

// The type of a grammar the server writes itself (parallel tool calls): `value_json` is a JSON
// Schema compiled as it is, without TGI's rules for a sent schema (a top-level `properties`).
inline constexpr const char* kToolCallsGrammar = "tool_calls";

// `parameters.grammar`: {"type": ..., "value": ...}.
struct GrammarParameter {
  // "json" (also for the alias "json_object"), "regex", "json_schema", kAnyJsonObjectGrammar or
  // kToolCallsGrammar
  std::string type;
  std::string value_json;  // raw JSON text of `value` ("" for kAnyJsonObjectGrammar)
};

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

// The parameters as TGI's spans and logs show them (Rust's Debug form of its struct, its field
// order): `GenerateParameters { adapter_id: None, best_of: None, temperature: Some(0.5), ... }`.
std::string debug_text(const GenerateParameters& parameters);

// One prompt with its parameters, as a route hands it to validation.
struct ParsedGenerateRequest {
  std::string inputs;
  GenerateParameters parameters;
  bool stream = false;  // only read from TGI's compat bodies (POST /, /invocations)
};

}  // namespace lm
