// What a request constrains its output to, before compilation: a JSON Schema, any JSON object,
// or a regular expression. Plain data; the key of the compiled-grammar cache.
#pragma once

#include <string>

namespace lm {

enum class GrammarKind {
  kJsonSchema,  // text: a JSON Schema (JSON text)
  kJsonObject,  // any JSON object (OpenAI's json_object); text unused
  kRegex,       // text: a regular expression
};

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kJsonObject;
  std::string text;

  bool operator==(const GrammarSpec&) const = default;
};

}  // namespace lm
