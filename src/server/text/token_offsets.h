// Token byte offsets for /tokenize and /chat_tokenize: the text each token adds under incremental
// decoding, located in the tokenized text (special tokens take no bytes of it).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "server/tgi/info_response.h"
#include "tokenizer/tokenizer.h"

namespace lm {

std::vector<TokenizeEntry> token_offsets(const Tokenizer& tokenizer, std::string_view text,
                                         const std::vector<int32_t>& ids);

}  // namespace lm
