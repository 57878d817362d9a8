// What a tokenizer_config.json says beyond the tokenizer itself: the chat template and the
// bos/eos token texts (the model folder's, or TGI's --tokenizer-config-path), and the chat
// template a model folder's chat_template.json puts in its place.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace lm {

struct TokenizerConfig {
  std::string chat_template;      // "" when none; a list of named templates gives "default"
  std::string tool_use_template;  // the named template "tool_use" ("" when none)
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
};

// `origin` names the file in errors; empty text is an empty config.
Result<TokenizerConfig> parse_tokenizer_config(std::string_view json, const std::string& origin);
Result<TokenizerConfig> read_tokenizer_config(const std::string& path);

// The text of a model folder's tokenizer_config.json ("" when absent) as transformers serves
// it: when chat_template.json ({"chat_template": ...}, the file newer Hub repositories ship) is
// beside it, its template replaces the config's, as a transformers processor loads it over the
// tokenizer's (and TGI reads the processor's template first); chat_template.jinja and
// additional_chat_templates/<name>.jinja (transformers' raw template files) replace both. Other
// keys stay.
Result<std::string> read_model_tokenizer_config(const std::string& dir);

}  // namespace lm
