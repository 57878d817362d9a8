#include "base/utf8.h"

namespace lm {

size_t utf8_valid_len(std::string_view s, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(pos);
  if (b0 < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (pos + need > s.size()) return 0;
  if (byte(pos + 1) < lo || byte(pos + 1) > hi) return 0;
  for (size_t i = 2; i < need; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return 0;
  }
  return need;
}

char32_t utf8_next(std::string_view s, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  const size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t cp = b0 & (0x7F >> n);
  for (size_t i = 1; i < n && pos + i < s.size(); ++i) {
    cp = (cp << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
  }
  pos += n;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_valid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = utf8_valid_len(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

// The length of the maximal prefix of an invalid sequence at pos that could start a valid one:
// the lead byte plus the continuation bytes that were still acceptable (at least 1).
static size_t invalid_prefix_len(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  size_t len = 1;
  for (size_t i = 1; i < need && pos + i < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[pos + i]);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b & 0xC0) == 0x80;
    if (!ok) break;
    ++len;
  }
  return len;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t pos = 0; pos < bytes.size();) {
    const size_t n = utf8_valid_len(bytes, pos);
    if (n > 0) {
      out.append(bytes.substr(pos, n));
      pos += n;
    } else {
      out.append(kReplacementChar);
      pos += invalid_prefix_len(bytes, pos);
    }
  }
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t count = 0;
  for (unsigned char c : s) count += (c & 0xC0) != 0x80;
  return count;
}

bool is_unicode_whitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

}  // namespace lm
