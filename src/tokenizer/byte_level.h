// GPT-2's reversible byte <-> printable-character map used by byte-level BPE vocabularies
// (bytes_to_unicode): byte-level pre-tokenization maps bytes to characters, decoding maps back.
#pragma once

#include <string>
#include <string_view>

namespace lm {

// The vocabulary spelling (UTF-8) of one byte.
const std::string& byte_to_unicode(unsigned char byte);

// The byte a character stands for, or -1 when the character is not in the byte alphabet.
int unicode_to_byte(char32_t cp);

// Spells every byte of text in the byte alphabet.
std::string bytes_to_unicode_string(std::string_view text);

// The GPT-2 pre-tokenizer regex (ByteLevel with use_regex=true).
inline constexpr const char* kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace lm
