#include "server/admission/generate_parameters.h"

#include <fmt/format.h>

namespace lm {
namespace {

// Rust's Debug of a str: quoted, with \" \\ \n \r \t \0 and \u{..} for other control characters.
std::string debug(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const char* escape = c == '"'    ? "\\\""
                         : c == '\\' ? "\\\\"
                         : c == '\n' ? "\\n"
                         : c == '\r' ? "\\r"
                         : c == '\t' ? "\\t"
                         : c == '\0' ? "\\0"
                                     : nullptr;
    if (escape != nullptr) {
      out += escape;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{{{:x}}}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Rust prints a float's shortest round-trip digits and keeps ".0" on whole numbers.
std::string debug(float value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string debug(bool value) { return value ? "true" : "false"; }
std::string debug(uint64_t value) { return std::to_string(value); }
std::string debug(uint32_t value) { return std::to_string(value); }
std::string debug(int32_t value) { return std::to_string(value); }

std::string debug(const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i > 0 ? ", " : "") + debug(values[i]);
  return out + "]";
}

std::string debug(const GrammarParameter& grammar) {
  if (grammar.type == "regex") return "Regex(" + grammar.value_json + ")";
  if (grammar.type == "json_schema") return "JsonSchema(" + grammar.value_json + ")";
  return "Json(" + grammar.value_json + ")";
}

template <typename T>
std::string debug(const std::optional<T>& value) {
  return value ? "Some(" + debug(*value) + ")" : std::string("None");
}

}  // namespace

std::string debug_text(const GenerateParameters& p) {
  return fmt::format(
      "GenerateParameters {{ adapter_id: {}, best_of: {}, temperature: {}, repetition_penalty: "
      "{}, frequency_penalty: {}, top_k: {}, top_p: {}, typical_p: {}, do_sample: {}, "
      "max_new_tokens: {}, return_full_text: {}, stop: {}, truncate: {}, watermark: {}, "
      "details: {}, decoder_input_details: {}, seed: {}, top_n_tokens: {}, grammar: {} }}",
      debug(p.adapter_id), debug(p.best_of), debug(p.temperature), debug(p.repetition_penalty),
      debug(p.frequency_penalty), debug(p.top_k), debug(p.top_p), debug(p.typical_p),
      debug(p.do_sample), debug(p.max_new_tokens), debug(p.return_full_text), debug(p.stop),
      debug(p.truncate), debug(p.watermark), debug(p.details), debug(p.decoder_input_details),
      debug(p.seed), debug(p.top_n_tokens), debug(p.grammar));
}

}  // namespace lm
