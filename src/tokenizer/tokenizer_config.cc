#include "tokenizer/tokenizer_config.h"

#include <nlohmann/json.hpp>

#include "base/text_file.h"

namespace lm {
namespace {

using Json = nlohmann::json;

// A token named in tokenizer_config.json: "text" or {"content": "text", ...}.
std::optional<std::string> config_token(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::nullopt;
}

std::string config_chat_template(const Json& config) {
  auto it = config.find("chat_template");
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {  // [{"name": ..., "template": ...}]: the "default" one
    for (const Json& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
  }
  return "";
}

}  // namespace

Result<TokenizerConfig> parse_tokenizer_config(std::string_view json, const std::string& origin) {
  TokenizerConfig out;
  if (json.empty()) return out;
  const Json config = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return Error{origin + " is not valid JSON"};
  if (!config.is_object()) return Error{origin + " must hold a JSON object"};
  out.chat_template = config_chat_template(config);
  out.bos_token = config_token(config, "bos_token");
  out.eos_token = config_token(config, "eos_token");
  return out;
}

Result<TokenizerConfig> read_tokenizer_config(const std::string& path) {
  LM_ASSIGN_OR_RETURN(std::string text, read_text_file(path, 64ull << 20));
  return parse_tokenizer_config(text, path);
}

}  // namespace lm
