// Parsing of /generate-shaped bodies (see generate_request.h). Field lists follow
// TGI's Rust structs in declaration order (serde accepts structs as arrays in that order).
#include "server/tgi/generate_request.h"

#include <array>

#include <nlohmann/json.hpp>

#include "server/wire/serde_json_reader.h"

namespace lm {
namespace {

enum ParamField : size_t {
  kBestOf,
  kTemperature,
  kRepetitionPenalty,
  kFrequencyPenalty,
  kTopK,
  kTopP,
  kTypicalP,
  kDoSample,
  kMaxNewTokens,
  kReturnFullText,
  kStop,
  kTruncate,
  kWatermark,
  kDetails,
  kDecoderInputDetails,
  kSeed,
  kTopNTokens,
  kGrammar,
  kAdapterId,
};

constexpr std::array<SerdeField, 19> kParameterFields = {{
    {"best_of", false},
    {"temperature", false},
    {"repetition_penalty", false},
    {"frequency_penalty", false},
    {"top_k", false},
    {"top_p", false},
    {"typical_p", false},
    {"do_sample", false},
    {"max_new_tokens", false},
    {"return_full_text", false},
    {"stop", false},
    {"truncate", false},
    {"watermark", false},
    {"details", false},
    {"decoder_input_details", false},
    {"seed", false},
    {"top_n_tokens", false},
    {"grammar", false},
    {"adapter_id", false},
}};

// Option<T>: null -> nullopt, anything else read by `read`.
template <typename T, typename ReadFn>
bool read_optional(SerdeJsonReader& reader, std::optional<T>& out, ReadFn read) {
  bool is_null = false;
  if (!reader.read_null(is_null)) return false;
  if (is_null) {
    out.reset();
    return true;
  }
  T value{};
  if (!read(value)) return false;
  out = std::move(value);
  return true;
}

// GrammarType is adjacently tagged ({"type", "value"}). Approximation: `value` is captured as
// raw JSON and checked against the variant afterwards, so a wrong-typed regex value reports
// the position after the whole object rather than after the value.
bool read_grammar(SerdeJsonReader& reader, GrammarParameter& out) {
  static constexpr std::array<SerdeField, 2> kFields = {{{"type", true}, {"value", true}}};
  std::string type;
  std::string value;
  const bool ok =
      reader.read_struct("adjacently tagged enum GrammarType", kFields, [&](size_t field) {
        if (field == 1) return reader.read_raw(value);
        if (!reader.read_string(type)) return false;
        if (type != "json" && type != "json_object" && type != "regex" && type != "json_schema") {
          return reader.fail_data(
              "unknown variant `" + type +
              "`, expected one of `json`, `json_object`, `regex`, `json_schema`");
        }
        return true;
      });
  if (!ok) return false;
  if (type == "regex" || type == "json_schema") {
    const auto parsed = nlohmann::json::parse(value, nullptr, false);
    if (type == "regex" && !parsed.is_string()) {
      return reader.fail_data("invalid type: " + std::string(parsed.type_name()) +
                              ", expected a string");
    }
    if (type == "json_schema" && !(parsed.is_object() && parsed.contains("schema"))) {
      return reader.fail_data(parsed.is_object()
                                  ? "missing field `schema`"
                                  : "invalid type: " + std::string(parsed.type_name()) +
                                        ", expected struct JsonSchemaConfig");
    }
  }
  out.type = type == "json_object" ? "json" : type;
  out.value_json = std::move(value);
  return true;
}

bool read_parameters(SerdeJsonReader& reader, GenerateParameters& p) {
  p = GenerateParameters{};  // present `parameters`: per-field serde defaults (do_sample false)
  return reader.read_struct("struct GenerateParameters", kParameterFields, [&](size_t field) {
    const auto f32 = [&](float& v) { return reader.read_f32(v); };
    const auto u32 = [&](uint32_t& v) { return reader.read_u32(v); };
    const auto usize = [&](uint64_t& v) { return reader.read_u64(v, "usize"); };
    const auto boolean = [&](bool& v) { return reader.read_bool(v); };
    switch (static_cast<ParamField>(field)) {
      case kBestOf:
        return read_optional(reader, p.best_of, usize);
      case kTemperature:
        return read_optional(reader, p.temperature, f32);
      case kRepetitionPenalty:
        return read_optional(reader, p.repetition_penalty, f32);
      case kFrequencyPenalty:
        return read_optional(reader, p.frequency_penalty, f32);
      case kTopK:
        return read_optional(reader, p.top_k, [&](int32_t& v) { return reader.read_i32(v); });
      case kTopP:
        return read_optional(reader, p.top_p, f32);
      case kTypicalP:
        return read_optional(reader, p.typical_p, f32);
      case kDoSample:
        return reader.read_bool(p.do_sample);
      case kMaxNewTokens:
        return read_optional(reader, p.max_new_tokens, u32);
      case kReturnFullText:
        return read_optional(reader, p.return_full_text, boolean);
      case kStop:
        return reader.read_string_seq(p.stop);
      case kTruncate:
        return read_optional(reader, p.truncate, usize);
      case kWatermark:
        return reader.read_bool(p.watermark);
      case kDetails:
        return reader.read_bool(p.details);
      case kDecoderInputDetails:
        return reader.read_bool(p.decoder_input_details);
      case kSeed:
        return read_optional(reader, p.seed,
                             [&](uint64_t& v) { return reader.read_u64(v, "u64"); });
      case kTopNTokens:
        return read_optional(reader, p.top_n_tokens, u32);
      case kGrammar:
        return read_optional(reader, p.grammar,
                             [&](GrammarParameter& g) { return read_grammar(reader, g); });
      case kAdapterId:
        return read_optional(reader, p.adapter_id,
                             [&](std::string& s) { return reader.read_string(s); });
    }
    return false;
  });
}

}  // namespace

GenerateParameters default_generate_parameters() {
  GenerateParameters p;
  p.do_sample = true;
  return p;
}

std::variant<ParsedGenerateRequest, BodyRejection> parse_generate_request(std::string_view body,
                                                                          GenerateBody shape) {
  static constexpr std::array<SerdeField, 3> kFields = {
      {{"inputs", true}, {"parameters", false}, {"stream", false}}};
  const bool compat = shape == GenerateBody::kCompat;
  ParsedGenerateRequest request;
  request.parameters = default_generate_parameters();  // `parameters` absent: sampling on
  SerdeJsonReader reader(body);
  const bool ok = reader.read_struct(
      compat ? "struct CompatGenerateRequest" : "struct GenerateRequest",
      std::span<const SerdeField>(kFields.data(), compat ? 3 : 2), [&](size_t field) {
        if (field == 0) return reader.read_string(request.inputs);
        if (field == 1) return read_parameters(reader, request.parameters);
        return reader.read_bool(request.stream);
      });
  if (ok) return request;
  const SerdeError& error = reader.error();
  if (error.kind == SerdeErrorKind::kSyntax) {
    return BodyRejection{400, "Failed to parse the request body as JSON: " + error.message};
  }
  return BodyRejection{
      422, "Failed to deserialize the JSON body into the target type: " + error.message};
}

AdmissionRequest generate_admission_request(ParsedGenerateRequest request, bool streaming) {
  AdmissionRequest out;
  out.prompts = {std::move(request.inputs)};
  out.parameters = std::move(request.parameters);
  out.streaming = streaming;
  return out;
}

}  // namespace lm
