#include "grammar/unenforced_keywords.h"

#include <nlohmann/json.hpp>

#include <array>

namespace lm {
namespace {

using nlohmann::json;

// json_schema_converter.cc: WarnUnsupportedKeywords(schema, {"not", "if", "then", "else",
// "dependentRequired", "dependentSchemas"}) for every schema and ({"uniqueItems", "contains",
// "minContains", "maxContains"}) for arrays, both silent by default.
constexpr std::array<std::string_view, 10> kIgnored = {
    "not",         "if",       "then",        "else",       "dependentRequired", "dependentSchemas",
    "uniqueItems", "contains", "minContains", "maxContains"};

// The formats of JSON Schema 2020-12 that XGrammar has no rule for: it generates any string for
// them, while a format-asserting validator (jsonschema's FormatChecker) checks them. Other
// unknown formats ("password", "int32") no validator checks, so they stay free strings.
constexpr std::array<std::string_view, 5> kUnenforcedFormats = {"idn-email", "idn-hostname", "iri",
                                                                "iri-reference", "regex"};

// Keywords whose value is one schema, and those whose value is a map or list of schemas.
constexpr std::array<std::string_view, 5> kSchemaValued = {
    "additionalProperties", "items", "propertyNames", "unevaluatedProperties", "additionalItems"};
constexpr std::array<std::string_view, 8> kSchemaContainers = {
    "properties", "patternProperties", "$defs", "definitions", "prefixItems", "anyOf", "oneOf",
    "allOf"};

std::string escape_pointer(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::string> find_in(const json& schema, const std::string& path, int depth) {
  if (!schema.is_object() || depth > 64) return std::nullopt;
  for (std::string_view keyword : kIgnored) {
    if (schema.contains(std::string(keyword)))
      return "`" + std::string(keyword) + "` at " + (path.empty() ? "/" : path);
  }
  if (const auto format = schema.find("format"); format != schema.end() && format->is_string()) {
    for (std::string_view unenforced : kUnenforcedFormats) {
      if (format->get_ref<const std::string&>() == unenforced)
        return "`format: " + std::string(unenforced) + "` at " + (path.empty() ? "/" : path);
    }
  }
  for (std::string_view keyword : kSchemaValued) {
    const auto it = schema.find(std::string(keyword));
    if (it == schema.end()) continue;
    if (auto found = find_in(*it, path + "/" + std::string(keyword), depth + 1)) return found;
  }
  for (std::string_view keyword : kSchemaContainers) {
    const auto it = schema.find(std::string(keyword));
    if (it == schema.end()) continue;
    const std::string base = path + "/" + std::string(keyword) + "/";
    if (it->is_object()) {
      for (const auto& [key, sub] : it->items()) {
        if (auto found = find_in(sub, base + escape_pointer(key), depth + 1)) return found;
      }
    } else if (it->is_array()) {
      for (size_t i = 0; i < it->size(); ++i) {
        if (auto found = find_in((*it)[i], base + std::to_string(i), depth + 1)) return found;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> find_unenforced_keyword(std::string_view schema_json) {
  const json schema = json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return std::nullopt;
  return find_in(schema, "", 0);
}

}  // namespace lm
