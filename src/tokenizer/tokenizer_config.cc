#include "tokenizer/tokenizer_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>

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

// The template named `name`: the plain string for "default", or the entry of a list of named
// templates ([{"name": ..., "template": ...}], as transformers saves several), "" when absent.
std::string config_chat_template(const Json& config, const std::string& name) {
  auto it = config.find("chat_template");
  if (it == config.end()) return "";
  if (it->is_string()) return name == "default" ? it->get<std::string>() : "";
  if (it->is_array()) {
    for (const Json& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == name && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
  }
  return "";
}

// The raw template files transformers saves since 4.50 and loads over tokenizer_config.json's
// templates: chat_template.jinja ("default") and additional_chat_templates/<name>.jinja. Empty when
// the folder has neither.
Result<std::map<std::string, std::string>> jinja_templates(const std::string& dir) {
  std::map<std::string, std::string> templates;
  const std::string main_path = dir + "/chat_template.jinja";
  if (file_exists(main_path)) {
    LM_ASSIGN_OR_RETURN(templates["default"], read_text_file(main_path, 64ull << 20));
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path extra = fs::path(dir) / "additional_chat_templates";
  if (!fs::is_directory(extra, ec)) return templates;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(extra, ec))
    if (entry.path().extension() == ".jinja") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    LM_ASSIGN_OR_RETURN(templates[file.stem().string()],
                        read_text_file(file.string(), 64ull << 20));
  }
  return templates;
}

}  // namespace

Result<TokenizerConfig> parse_tokenizer_config(std::string_view json, const std::string& origin) {
  TokenizerConfig out;
  if (json.empty()) return out;
  const Json config = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return Error{origin + " is not valid JSON"};
  if (!config.is_object()) return Error{origin + " must hold a JSON object"};
  out.chat_template = config_chat_template(config, "default");
  out.tool_use_template = config_chat_template(config, "tool_use");
  out.bos_token = config_token(config, "bos_token");
  out.eos_token = config_token(config, "eos_token");
  return out;
}

Result<TokenizerConfig> read_tokenizer_config(const std::string& path) {
  LM_ASSIGN_OR_RETURN(std::string text, read_text_file(path, 64ull << 20));
  return parse_tokenizer_config(text, path);
}

Result<std::string> read_model_tokenizer_config(const std::string& dir) {
  const std::string config_path = dir + "/tokenizer_config.json";
  const std::string template_path = dir + "/chat_template.json";
  std::string config_text;
  if (file_exists(config_path)) {
    LM_ASSIGN_OR_RETURN(config_text, read_text_file(config_path, 64ull << 20));
  }
  LM_ASSIGN_OR_RETURN(const auto jinja, jinja_templates(dir));
  if (!file_exists(template_path) && jinja.empty()) return config_text;
  Json config = Json::object();
  if (!config_text.empty()) {
    config = Json::parse(config_text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object())
      return Error{config_path + " must hold a JSON object"};
  }
  if (!jinja.empty()) {
    // As transformers: the .jinja files replace every template of the config, a lone default as
    // a string, several as the named list.
    if (jinja.size() == 1 && jinja.count("default") == 1) {
      config["chat_template"] = jinja.at("default");
    } else {
      Json list = Json::array();
      for (const auto& [name, text] : jinja) list.push_back({{"name", name}, {"template", text}});
      config["chat_template"] = list;
    }
    return config.dump();
  }
  LM_ASSIGN_OR_RETURN(std::string template_text, read_text_file(template_path, 64ull << 20));
  const Json file = Json::parse(template_text, nullptr, /*allow_exceptions=*/false);
  if (file.is_discarded() || !file.is_object() || !file.contains("chat_template") ||
      !(file["chat_template"].is_string() || file["chat_template"].is_array())) {
    return Error{template_path + " must hold {\"chat_template\": \"...\"}"};
  }
  config["chat_template"] = file["chat_template"];
  return config.dump();
}

}  // namespace lm
