#include "tokenizer/added_tokens.h"

#include <unicode/uchar.h>
#include <algorithm>

#include "base/utf8.h"

namespace lm {
namespace {

// Rust's char::is_alphanumeric || '_' (the "word" test of single_word).
bool is_word_char(char32_t cp) {
  return cp == '_' || u_isalpha(static_cast<UChar32>(cp)) ||
         (U_GET_GC_MASK(static_cast<UChar32>(cp)) & U_GC_N_MASK) != 0;
}

char32_t last_char(std::string_view s) {
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return utf8_next(s, start);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized_pass) {
  for (const AddedToken& token : tokens) {
    // A token that is not valid UTF-8 (only a hostile GGUF vocabulary has one) could match inside
    // a character and cut the text into invalid UTF-8, which the regexes must never see.
    if (token.normalized == normalized_pass && !token.content.empty() &&
        is_valid_utf8(token.content)) {
      tokens_.push_back(token);
    }
  }
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  by_first_byte_.resize(256);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& out) const {
  size_t start_offset = 0;  // end of the last emitted segment
  size_t pos = 0;
  while (pos < text.size()) {
    // Leftmost-longest: the first position with a match, the longest token there.
    const AddedToken* hit = nullptr;
    for (size_t index : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      const AddedToken& token = tokens_[index];
      if (text.compare(pos, token.content.size(), token.content) != 0) continue;
      const size_t stop = pos + token.content.size();
      if (token.single_word) {
        const bool start_ok = pos == 0 || !is_word_char(last_char(text.substr(0, pos)));
        size_t after = stop;
        const bool stop_ok = stop == text.size() || !is_word_char(utf8_next(text, after));
        if (!start_ok || !stop_ok) continue;
      }
      hit = &token;
      break;
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, stop = pos + hit->content.size();
    if (hit->lstrip) {
      while (begin > start_offset) {
        size_t prev = begin - 1;
        while (prev > start_offset && (static_cast<unsigned char>(text[prev]) & 0xC0) == 0x80) {
          --prev;
        }
        size_t probe = prev;
        if (!is_unicode_whitespace(utf8_next(text, probe))) break;
        begin = prev;
      }
    }
    if (hit->rstrip) {
      while (stop < text.size()) {
        size_t probe = stop;
        if (!is_unicode_whitespace(utf8_next(text, probe))) break;
        stop = probe;
      }
    }
    if (begin > start_offset) out.push_back({text.substr(start_offset, begin - start_offset), -1});
    out.push_back({text.substr(begin, stop - begin), hit->id});
    start_offset = stop;
    pos = stop;
  }
  if (start_offset < text.size()) out.push_back({text.substr(start_offset), -1});
}

}  // namespace lm
