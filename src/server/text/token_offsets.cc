#include "server/text/token_offsets.h"

#include <string>

namespace lm {

std::vector<TokenizeEntry> token_offsets(const Tokenizer& tokenizer, std::string_view text,
                                         const std::vector<int32_t>& ids) {
  std::vector<TokenizeEntry> entries;
  size_t cursor = 0;
  std::vector<int32_t> prefix;
  std::string decoded;
  for (int32_t id : ids) {
    prefix.push_back(id);
    std::string now = tokenizer.decode(prefix, /*skip_special_tokens=*/false);
    std::string piece = now.size() >= decoded.size() ? now.substr(decoded.size()) : std::string();
    decoded = std::move(now);
    TokenizeEntry e;
    e.id = static_cast<uint32_t>(id);
    const size_t at = piece.empty() ? std::string::npos : text.find(piece, cursor);
    if (at != std::string::npos && !tokenizer.is_special(id)) {
      e.start = at;
      e.stop = at + piece.size();
      e.text = piece;
      cursor = e.stop;
    } else {
      e.start = e.stop = cursor;
      e.text = tokenizer.is_special(id) ? std::string(tokenizer.token_text(id)) : piece;
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace lm
