#include "tokenizer/decoder.h"

#include "base/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"

namespace lm {

void ByteLevelDecoder::decode_chain(std::vector<std::string>& tokens) const {
  std::string bytes;
  for (const std::string& token : tokens) {
    const size_t mark = bytes.size();
    bool all_mapped = true;
    for (size_t pos = 0; pos < token.size();) {
      if (utf8_valid_len(token, pos) == 0) {
        all_mapped = false;
        break;
      }
      const int byte = unicode_to_byte(utf8_next(token, pos));
      if (byte < 0) {
        all_mapped = false;
        break;
      }
      bytes += static_cast<char>(byte);
    }
    if (!all_mapped) {
      bytes.resize(mark);
      bytes += token;
    }
  }
  tokens.assign(1, utf8_lossy(bytes));
}

std::string ByteLevelDecoder::token_bytes(std::string token) const {
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    if (utf8_valid_len(token, pos) == 0) return token;
    const int byte = unicode_to_byte(utf8_next(token, pos));
    if (byte < 0) return token;  // not in the byte alphabet (an added token): as it is
    bytes += static_cast<char>(byte);
  }
  return bytes;
}

void ReplaceDecoder::decode_chain(std::vector<std::string>& tokens) const {
  for (std::string& token : tokens) token = replace_all(token, from_, to_);
}

std::string ReplaceDecoder::token_bytes(std::string token) const {
  return replace_all(token, from_, to_);
}

static int parse_byte_token(const std::string& token) {
  // "<0xXX>" with upper- or lower-case hex digits, as HF's ByteFallback accepts.
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = token[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

void ByteFallbackDecoder::decode_chain(std::vector<std::string>& tokens) const {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string pending;  // bytes of consecutive byte tokens
  size_t pending_count = 0;
  auto flush = [&] {
    if (pending_count == 0) return;
    if (is_valid_utf8(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending_count; ++i) out.emplace_back(kReplacementChar);
    }
    pending.clear();
    pending_count = 0;
  };
  for (std::string& token : tokens) {
    const int byte = parse_byte_token(token);
    if (byte >= 0) {
      pending += static_cast<char>(byte);
      ++pending_count;
    } else {
      flush();
      out.push_back(std::move(token));
    }
  }
  flush();
  tokens = std::move(out);
}

std::string ByteFallbackDecoder::token_bytes(std::string token) const {
  const int byte = parse_byte_token(token);
  return byte >= 0 ? std::string(1, static_cast<char>(byte)) : token;
}

void FuseDecoder::decode_chain(std::vector<std::string>& tokens) const {
  std::string joined;
  for (const std::string& token : tokens) joined += token;
  tokens.assign(1, std::move(joined));
}

void StripDecoder::decode_chain(std::vector<std::string>& tokens) const {
  if (content_.empty()) return;
  for (std::string& token : tokens) {
    size_t begin = 0, end = token.size();
    for (size_t i = 0; i < start_ && token.compare(begin, content_.size(), content_) == 0; ++i) {
      begin += content_.size();
    }
    for (size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                       token.compare(end - content_.size(), content_.size(), content_) == 0;
         ++i) {
      end -= content_.size();
    }
    token = token.substr(begin, end - begin);
  }
}

void MetaspaceDecoder::decode_chain(std::vector<std::string>& tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string& token = tokens[i];
    if (i == 0 && strip_first_ && token.compare(0, replacement_.size(), replacement_) == 0) {
      token.erase(0, replacement_.size());
    }
    token = replace_all(token, replacement_, " ");
  }
}

std::string MetaspaceDecoder::token_bytes(std::string token) const {
  return replace_all(token, replacement_, " ");
}

}  // namespace lm
