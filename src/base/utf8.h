// UTF-8 helpers shared by the tokenizer, the template engine and the server: walking code
// points, encoding them, validation, and the lossy conversion (one U+FFFD per maximal invalid
// subsequence, as Rust's from_utf8_lossy does).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lm {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at s[pos], or 0 when it is invalid/incomplete.
size_t utf8_valid_len(std::string_view s, size_t pos);

// Decodes the code point at s[pos] (which must start a valid sequence) and advances pos.
char32_t utf8_next(std::string_view s, size_t& pos);

void append_utf8(std::string& out, char32_t cp);

bool is_valid_utf8(std::string_view s);

// Valid UTF-8 with every maximal invalid subsequence replaced by U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// Number of code points of valid UTF-8.
size_t utf8_length(std::string_view s);

// Unicode White_Space (Rust's char::is_whitespace).
bool is_unicode_whitespace(char32_t cp);

}  // namespace lm
