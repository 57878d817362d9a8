#include "tokenizer/byte_level.h"

#include <array>

#include "base/utf8.h"

namespace lm {
namespace {

struct ByteMap {
  std::array<std::string, 256> spelling;
  std::array<int, 324> byte_of_cp;  // code points used are < 256 + 68

  ByteMap() {
    byte_of_cp.fill(-1);
    std::array<char32_t, 256> cp_of_byte{};
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) cp_of_byte[b] = printable[b] ? static_cast<char32_t>(b) : next++;
    for (int b = 0; b < 256; ++b) {
      append_utf8(spelling[b], cp_of_byte[b]);
      byte_of_cp[cp_of_byte[b]] = b;
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;  // immutable table, built once (thread-safe static init)
  return map;
}

}  // namespace

const std::string& byte_to_unicode(unsigned char byte) { return byte_map().spelling[byte]; }

int unicode_to_byte(char32_t cp) {
  const auto& table = byte_map().byte_of_cp;
  return cp < table.size() ? table[cp] : -1;
}

std::string bytes_to_unicode_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (unsigned char c : text) out += byte_to_unicode(c);
  return out;
}

}  // namespace lm
