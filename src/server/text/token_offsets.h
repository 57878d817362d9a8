// Token byte offsets for /tokenize and /chat_tokenize: HF tokenizers' (Tokenizer::offsets), as TGI
// reports them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace lm {

// One /tokenize entry: start/stop are byte offsets into `inputs`, text that byte slice.
struct TokenizeEntry {
  uint32_t id = 0;
  std::string text;
  size_t start = 0;
  size_t stop = 0;
};
// `ids` is tokenizer.encode(text, add_special_tokens, ...).
std::vector<TokenizeEntry> token_offsets(const Tokenizer& tokenizer, std::string_view text,
                                         const std::vector<int32_t>& ids, bool add_special_tokens);

}  // namespace lm
