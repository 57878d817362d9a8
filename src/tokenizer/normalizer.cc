#include "tokenizer/normalizer.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include "base/utf8.h"

namespace lm {

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

void PrependNormalizer::normalize(std::string& text) const {
  if (!text.empty()) text.insert(0, prefix_);
}

void ReplaceNormalizer::normalize(std::string& text) const {
  if (!regex_) {
    text = replace_all(text, literal_, content_);
    return;
  }
  std::string out;
  size_t pos = 0;
  for (const auto& [begin, end] : regex_->find_all(text)) {
    out.append(text, pos, begin - pos);
    out.append(content_);
    pos = end;
  }
  out.append(text, pos, std::string::npos);
  text = std::move(out);
}

void UnicodeNormalizer::normalize(std::string& text) const {
  const icu::UnicodeString input = icu::UnicodeString::fromUTF8(text);
  icu::UnicodeString output;
  if (form_ == Form::kLowercase) {
    output = input;
    output.toLower();
  } else {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* normalizer = nullptr;
    switch (form_) {
      case Form::kNfc:
        normalizer = icu::Normalizer2::getNFCInstance(status);
        break;
      case Form::kNfd:
        normalizer = icu::Normalizer2::getNFDInstance(status);
        break;
      case Form::kNfkc:
        normalizer = icu::Normalizer2::getNFKCInstance(status);
        break;
      default:
        normalizer = icu::Normalizer2::getNFKDInstance(status);
        break;
    }
    LM_CHECK_MSG(U_SUCCESS(status) && normalizer != nullptr, "ICU normalizer unavailable");
    output = normalizer->normalize(input, status);
    LM_CHECK_MSG(U_SUCCESS(status), "ICU normalization failed");
  }
  text.clear();
  output.toUTF8String(text);
}

void StripNormalizer::normalize(std::string& text) const {
  size_t begin = 0, end = text.size();
  if (left_) {
    while (begin < end) {
      size_t pos = begin;
      if (!is_unicode_whitespace(utf8_next(text, pos))) break;
      begin = pos;
    }
  }
  if (right_) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t pos = start;
      if (!is_unicode_whitespace(utf8_next(text, pos))) break;
      end = start;
    }
  }
  text = text.substr(begin, end - begin);
}

}  // namespace lm
