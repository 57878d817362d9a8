#include "server/text/token_offsets.h"

#include <string>

#include "base/utf8.h"

namespace lm {

std::vector<TokenizeEntry> token_offsets(const Tokenizer& tokenizer, std::string_view text,
                                         const std::vector<int32_t>& ids, bool add_special_tokens) {
  const std::vector<Tokenizer::TextRange> ranges = tokenizer.offsets(text, ids, add_special_tokens);
  std::vector<TokenizeEntry> entries;
  entries.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    TokenizeEntry e;
    e.id = static_cast<uint32_t>(ids[i]);
    e.start = ranges[i].begin;
    e.stop = ranges[i].end;
    e.text = utf8_lossy(text.substr(e.start, e.stop - e.start));
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace lm
