// What a tokenizer_config.json says beyond the tokenizer itself: the chat template and the
// bos/eos token texts (the model folder's, or TGI's --tokenizer-config-path).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace lm {

struct TokenizerConfig {
  std::string chat_template;  // "" when none; a list of named templates gives "default"
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
};

// `origin` names the file in errors; empty text is an empty config.
Result<TokenizerConfig> parse_tokenizer_config(std::string_view json, const std::string& origin);
Result<TokenizerConfig> read_tokenizer_config(const std::string& path);

}  // namespace lm
