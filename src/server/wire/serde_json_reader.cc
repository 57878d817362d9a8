// serde_json-compatible pull reader (see serde_json_reader.h). The control flow mirrors
// serde_json's Deserializer (peek vs. consume decides each error's column), and the path
// bookkeeping mirrors serde_path_to_error (which segment is on the path when an error is made).
#include "server/wire/serde_json_reader.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "base/utf8.h"
#include "server/wire/json_text.h"

namespace lm {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

bool SerdeJsonReader::skip_whitespace() {
  while (!at_end() && is_space(peek())) ++index_;
  return !at_end();
}

std::string SerdeJsonReader::path_prefix() const {
  bool only_unknown = true;
  for (const Segment& s : path_) only_unknown = only_unknown && s.kind == Segment::kUnknown;
  if (only_unknown) return "";
  std::string out;
  const char* separator = "";
  for (const Segment& s : path_) {
    if (s.kind == Segment::kIndex) {
      out += "[" + std::to_string(s.index) + "]";
    } else {
      out += separator;
      out += s.kind == Segment::kKey ? s.key : "?";
    }
    separator = ".";
  }
  return out + ": ";
}

bool SerdeJsonReader::fail_at(size_t index, SerdeErrorKind kind, std::string message) {
  if (failed_) return false;  // the innermost error wins, as it propagates outwards unchanged
  failed_ = true;
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < index && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  error_.kind = kind;
  error_.message = path_prefix() + message + " at line " + std::to_string(line) + " column " +
                   std::to_string(index - line_start);
  return false;
}

bool SerdeJsonReader::syntax_peek_error(std::string_view code) {
  return fail_at(std::min(index_ + 1, text_.size()), SerdeErrorKind::kSyntax, std::string(code));
}

bool SerdeJsonReader::fail_data(std::string message) {
  return fail_at(index_, SerdeErrorKind::kData, std::move(message));
}

bool SerdeJsonReader::enter_nested() {
  if (--remaining_depth_ == 0) return syntax_peek_error("recursion limit exceeded");
  return true;
}

bool SerdeJsonReader::parse_ident(std::string_view rest) {
  for (char expected : rest) {
    if (at_end()) return syntax_error("EOF while parsing a value");
    if (text_[index_++] != expected) return syntax_error("expected ident");
  }
  return true;
}

bool SerdeJsonReader::parse_escape(std::string* out) {
  if (at_end()) return syntax_error("EOF while parsing a string");
  const char c = text_[index_++];
  const auto put = [&](char x) {
    if (out) out->push_back(x);
    return true;
  };
  switch (c) {
    case '"':
      return put('"');
    case '\\':
      return put('\\');
    case '/':
      return put('/');
    case 'b':
      return put('\b');
    case 'f':
      return put('\f');
    case 'n':
      return put('\n');
    case 'r':
      return put('\r');
    case 't':
      return put('\t');
    case 'u':
      break;
    default:
      return syntax_error("invalid escape");
  }
  const auto hex4 = [&](uint32_t& v) {
    if (text_.size() - index_ < 4) {
      index_ = text_.size();
      return syntax_error("EOF while parsing a string");
    }
    v = 0;
    bool ok = true;
    for (int k = 0; k < 4; ++k) {
      const int h = hex_value(text_[index_ + static_cast<size_t>(k)]);
      ok = ok && h >= 0;
      v = v * 16 + static_cast<uint32_t>(h < 0 ? 0 : h);
    }
    index_ += 4;
    return ok ? true : syntax_error("invalid escape");
  };
  uint32_t cp = 0;
  if (!hex4(cp)) return false;
  if (out == nullptr) return true;  // ignored strings accept lone surrogates (serde_json: WTF-8)
  if (cp >= 0xDC00 && cp <= 0xDFFF) return syntax_error("lone leading surrogate in hex escape");
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    if (at_end()) return syntax_error("EOF while parsing a string");
    if (peek() != '\\') {
      ++index_;
      return syntax_error("unexpected end of hex escape");
    }
    ++index_;
    if (at_end()) return syntax_error("EOF while parsing a string");
    if (peek() != 'u') {
      ++index_;
      return syntax_error("unexpected end of hex escape");
    }
    ++index_;
    uint32_t low = 0;
    if (!hex4(low)) return false;
    if (low < 0xDC00 || low > 0xDFFF) return syntax_error("lone leading surrogate in hex escape");
    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
  }
  append_utf8(*out, cp);
  return true;
}

// After the opening quote; `out == nullptr` skips the string (serde_json's ignore_str).
bool SerdeJsonReader::parse_string_body(std::string* out, bool validate_utf8) {
  const size_t start = index_;
  std::string scratch;
  while (true) {
    if (at_end()) return syntax_error("EOF while parsing a string");
    const char c = peek();
    if (c == '"') {
      ++index_;
      break;
    }
    if (c == '\\') {
      ++index_;
      if (!parse_escape(out ? &scratch : nullptr)) return false;
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20) {
      return syntax_error("control character (\\u0000-\\u001F) found while parsing a string");
    }
    if (out) scratch.push_back(c);
    ++index_;
  }
  (void)start;
  if (out == nullptr) return true;
  if (validate_utf8 && !is_valid_utf8(scratch)) return syntax_error("invalid unicode code point");
  *out = std::move(scratch);
  return true;
}

bool SerdeJsonReader::parse_number(Number& out, bool compute) {
  const size_t start = index_;
  bool negative = false;
  if (peek() == '-') {
    negative = true;
    ++index_;
  }
  if (at_end()) return syntax_error("EOF while parsing a value");
  const char first = text_[index_++];
  if (first == '0') {
    if (!at_end() && is_digit(peek())) return syntax_peek_error("invalid number");
  } else if (!is_digit(first)) {
    return syntax_error("invalid number");
  }
  bool integer = true;
  while (!at_end() && is_digit(peek())) ++index_;
  if (!at_end() && peek() == '.') {
    integer = false;
    ++index_;
    if (at_end()) return syntax_peek_error("EOF while parsing a value");
    if (!is_digit(peek())) return syntax_peek_error("invalid number");
    while (!at_end() && is_digit(peek())) ++index_;
  }
  if (!at_end() && (peek() == 'e' || peek() == 'E')) {
    integer = false;
    ++index_;
    if (!at_end() && (peek() == '+' || peek() == '-')) ++index_;
    if (at_end()) return syntax_error("EOF while parsing a value");
    if (!is_digit(text_[index_++])) return syntax_error("invalid number");
    while (!at_end() && is_digit(peek())) ++index_;
  }
  if (!compute) return true;  // ignored numbers are never range-checked
  const std::string literal(text_.substr(start, index_ - start));
  if (integer) {
    // serde_json: integers that fit u64 (positive) or i64 (negative, except -0) stay integers.
    errno = 0;
    if (!negative) {
      const unsigned long long v = std::strtoull(literal.c_str(), nullptr, 10);
      if (errno == 0) {
        out.kind = Number::kUnsigned;
        out.u = v;
        return true;
      }
    } else {
      const long long v = std::strtoll(literal.c_str(), nullptr, 10);
      if (errno == 0 && v != 0) {
        out.kind = Number::kSigned;
        out.i = v;
        return true;
      }
    }
  }
  out.kind = Number::kFloat;
  out.f = std::strtod(literal.c_str(), nullptr);
  if (std::isinf(out.f)) return syntax_error("number out of range");
  return true;
}

namespace {

std::string describe_number(uint64_t u) { return "integer `" + std::to_string(u) + "`"; }
std::string describe_number(int64_t i) { return "integer `" + std::to_string(i) + "`"; }
std::string describe_float(double f) {
  std::string s = rust_f64_display(f);
  if (s.find('.') == std::string::npos) s += ".0";  // serde's WithDecimalPoint
  return "floating point `" + s + "`";
}

}  // namespace

bool SerdeJsonReader::invalid_value(const Number& n, std::string_view expected) {
  const std::string what = n.kind == Number::kUnsigned ? describe_number(n.u)
                           : n.kind == Number::kSigned ? describe_number(n.i)
                                                       : describe_float(n.f);
  return fail_data("invalid value: " + what + ", expected " + std::string(expected));
}

// serde_json's peek_invalid_type: scalars are consumed first (so the column is after them),
// arrays and objects are not.
bool SerdeJsonReader::invalid_type(std::string_view expected) {
  std::string what;
  const char c = peek();
  if (c == 'n') {
    ++index_;
    if (!parse_ident("ull")) return false;
    what = "null";
  } else if (c == 't') {
    ++index_;
    if (!parse_ident("rue")) return false;
    what = "boolean `true`";
  } else if (c == 'f') {
    ++index_;
    if (!parse_ident("alse")) return false;
    what = "boolean `false`";
  } else if (c == '-' || is_digit(c)) {
    Number n;
    if (!parse_number(n)) return false;
    what = n.kind == Number::kUnsigned ? describe_number(n.u)
           : n.kind == Number::kSigned ? describe_number(n.i)
                                       : describe_float(n.f);
  } else if (c == '"') {
    ++index_;
    std::string s;
    if (!parse_string_body(&s, true)) return false;
    what = "string " + rust_debug_str(s);
  } else if (c == '[') {
    what = "sequence";
  } else if (c == '{') {
    what = "map";
  } else {
    return syntax_peek_error("expected value");
  }
  return fail_data("invalid type: " + what + ", expected " + std::string(expected));
}

bool SerdeJsonReader::read_string(std::string& out) {
  if (!skip_whitespace()) return syntax_peek_error("EOF while parsing a value");
  if (peek() != '"') return invalid_type("a string");
  ++index_;
  return parse_string_body(&out, true);
}

bool SerdeJsonReader::read_bool(bool& out) {
  if (!skip_whitespace()) return syntax_peek_error("EOF while parsing a value");
  if (peek() == 't') {
    ++index_;
    out = true;
    return parse_ident("rue");
  }
  if (peek() == 'f') {
    ++index_;
    out = false;
    return parse_ident("alse");
  }
  return invalid_type("a boolean");
}

bool SerdeJsonReader::read_null(bool& is_null) {
  is_null = false;
  if (skip_whitespace() && peek() == 'n') {
    ++index_;
    is_null = true;
    return parse_ident("ull");
  }
  return true;
}

bool SerdeJsonReader::read_number(Number& out, std::string_view expected) {
  if (!skip_whitespace()) return syntax_peek_error("EOF while parsing a value");
  if (peek() != '-' && !is_digit(peek())) return invalid_type(expected);
  return parse_number(out);
}

bool SerdeJsonReader::read_f32(float& out) {
  Number n;
  if (!read_number(n, "f32")) return false;
  out = n.kind == Number::kUnsigned ? static_cast<float>(n.u)
        : n.kind == Number::kSigned ? static_cast<float>(n.i)
                                    : static_cast<float>(n.f);
  return true;
}

bool SerdeJsonReader::read_i32(int32_t& out) {
  Number n;
  if (!read_number(n, "i32")) return false;
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (n.kind == Number::kFloat)
    return fail_data("invalid type: " + describe_float(n.f) + ", expected i32");
  if (n.kind == Number::kUnsigned && n.u > static_cast<uint64_t>(kMax))
    return invalid_value(n, "i32");
  if (n.kind == Number::kSigned && n.i < kMin) return invalid_value(n, "i32");
  out = n.kind == Number::kUnsigned ? static_cast<int32_t>(n.u) : static_cast<int32_t>(n.i);
  return true;
}

bool SerdeJsonReader::read_u32(uint32_t& out) {
  Number n;
  if (!read_number(n, "u32")) return false;
  if (n.kind == Number::kFloat)
    return fail_data("invalid type: " + describe_float(n.f) + ", expected u32");
  if (n.kind == Number::kSigned || n.u > std::numeric_limits<uint32_t>::max()) {
    return invalid_value(n, "u32");
  }
  out = static_cast<uint32_t>(n.u);
  return true;
}

bool SerdeJsonReader::read_u64(uint64_t& out, std::string_view rust_type) {
  Number n;
  if (!read_number(n, rust_type)) return false;
  if (n.kind == Number::kFloat) {
    return fail_data("invalid type: " + describe_float(n.f) + ", expected " +
                     std::string(rust_type));
  }
  if (n.kind == Number::kSigned) return invalid_value(n, rust_type);
  out = n.u;
  return true;
}

bool SerdeJsonReader::next_element(bool& first, bool& done) {
  done = false;
  if (!skip_whitespace()) return syntax_peek_error("EOF while parsing a list");
  if (peek() == ']') {
    done = true;
    return true;
  }
  if (!first) {
    if (peek() != ',') return syntax_peek_error("expected `,` or `]`");
    ++index_;
    if (!skip_whitespace()) return syntax_peek_error("EOF while parsing a value");
  }
  first = false;
  if (peek() == ']') return syntax_peek_error("trailing comma");
  return true;
}

bool SerdeJsonReader::end_seq() {
  if (!skip_whitespace()) return syntax_peek_error("EOF while parsing a list");
  if (peek() == ']') {
    ++index_;
    return true;
  }
  if (peek() == ',') {
    ++index_;
    if (skip_whitespace() && peek() == ']') return syntax_peek_error("trailing comma");
  }
  return syntax_peek_error("trailing characters");
}

bool SerdeJsonReader::next_key(bool& first, bool& done) {
  done = false;
  if (!skip_whitespace()) return syntax_peek_error("EOF while parsing an object");
  if (peek() == '}') {
    done = true;
    return true;
  }
  if (!first) {
    if (peek() != ',') return syntax_peek_error("expected `,` or `}`");
    ++index_;
    if (!skip_whitespace()) return syntax_peek_error("EOF while parsing a value");
  }
  first = false;
  if (peek() == '}') return syntax_peek_error("trailing comma");
  if (peek() != '"') return syntax_peek_error("key must be a string");
  return true;
}

bool SerdeJsonReader::parse_colon() {
  if (!skip_whitespace()) return syntax_peek_error("EOF while parsing an object");
  if (peek() != ':') return syntax_peek_error("expected `:`");
  ++index_;
  return true;
}

bool SerdeJsonReader::end_map() {
  if (!skip_whitespace()) return syntax_peek_error("EOF while parsing an object");
  if (peek() == '}') {
    ++index_;
    return true;
  }
  if (peek() == ',') return syntax_peek_error("trailing comma");
  return syntax_peek_error("trailing characters");
}

bool SerdeJsonReader::ignore_value() {
  if (!skip_whitespace()) return syntax_peek_error("EOF while parsing a value");
  const char c = peek();
  if (c == 'n' || c == 't' || c == 'f') {
    ++index_;
    return parse_ident(c == 'n' ? "ull" : c == 't' ? "rue" : "alse");
  }
  if (c == '-' || is_digit(c)) {
    Number n;
    return parse_number(n, false);
  }
  if (c == '"') {
    ++index_;
    return parse_string_body(nullptr, false);
  }
  if (c == '[') {
    if (!enter_nested()) return false;
    ++index_;
    bool first = true, done = false;
    while (true) {
      if (!next_element(first, done)) return false;
      if (done) break;
      if (!ignore_value()) return false;
    }
    ++index_;
    leave_nested();
    return true;
  }
  if (c == '{') {
    if (!enter_nested()) return false;
    ++index_;
    bool first = true, done = false;
    while (true) {
      if (!next_key(first, done)) return false;
      if (done) break;
      ++index_;
      if (!parse_string_body(nullptr, false) || !parse_colon() || !ignore_value()) return false;
    }
    ++index_;
    leave_nested();
    return true;
  }
  return syntax_peek_error("expected value");
}

bool SerdeJsonReader::read_raw(std::string& raw_json) {
  skip_whitespace();
  const size_t start = index_;
  if (!ignore_value()) return false;
  raw_json = std::string(text_.substr(start, index_ - start));
  return true;
}

bool SerdeJsonReader::read_end() {
  if (skip_whitespace()) return syntax_peek_error("trailing characters");
  return true;
}

bool SerdeJsonReader::read_string_seq(std::vector<std::string>& out) {
  if (!skip_whitespace()) return syntax_peek_error("EOF while parsing a value");
  if (peek() != '[') return invalid_type("a sequence");
  if (!enter_nested()) return false;
  ++index_;
  out.clear();
  bool first = true, done = false;
  while (true) {
    if (!next_element(first, done)) return false;
    if (done) break;
    path_.push_back({Segment::kIndex, "", out.size()});
    std::string s;
    const bool ok = read_string(s);
    path_.pop_back();
    if (!ok) return false;
    out.push_back(std::move(s));
  }
  leave_nested();
  return end_seq();
}

bool SerdeJsonReader::read_struct(std::string_view expecting, std::span<const SerdeField> fields,
                                  const std::function<bool(size_t)>& read_field) {
  const std::string expected(expecting);
  if (!skip_whitespace()) return syntax_peek_error("EOF while parsing a value");
  const char c = peek();
  if (c != '{' && c != '[') return invalid_type(expected);
  if (!enter_nested()) return false;
  ++index_;
  std::vector<bool> seen(fields.size(), false);
  bool first = true, done = false;
  if (c == '[') {
    // serde derive accepts a struct as an array of its fields in declaration order.
    size_t i = 0;
    for (; i < fields.size(); ++i) {
      if (!next_element(first, done)) return false;
      if (done) break;
      path_.push_back({Segment::kIndex, "", i});
      const bool ok = read_field(i);
      path_.pop_back();
      if (!ok) return false;
    }
    leave_nested();
    for (size_t k = i; k < fields.size(); ++k) {
      if (fields[k].required) {
        end_seq();  // consumes the `]` (serde_json does so before positioning the error)
        const size_t n = fields.size();
        return fail_data("invalid length " + std::to_string(i) + ", expected " + expected +
                         " with " + std::to_string(n) + (n == 1 ? " element" : " elements"));
      }
    }
    return end_seq();
  }
  while (true) {
    path_.push_back({Segment::kUnknown, "", 0});  // errors before a key is read: "?"
    bool ok = next_key(first, done);
    std::string key;
    if (ok && !done) {
      ++index_;
      ok = parse_string_body(&key, true);
    }
    path_.pop_back();
    if (!ok) return false;
    if (done) break;
    size_t field = fields.size();
    for (size_t k = 0; k < fields.size(); ++k) {
      if (fields[k].name == key) field = k;
    }
    if (field < fields.size() && seen[field]) {
      skip_whitespace();  // serde_json's end_map skips whitespace before the error is positioned
      return fail_data("duplicate field `" + key + "`");
    }
    if (!parse_colon()) return false;
    path_.push_back({Segment::kKey, key, 0});
    ok = field < fields.size() ? read_field(field) : ignore_value();
    path_.pop_back();
    if (!ok) return false;
    if (field < fields.size()) seen[field] = true;
  }
  ++index_;  // the closing brace
  leave_nested();
  for (size_t k = 0; k < fields.size(); ++k) {
    if (fields[k].required && !seen[k]) {
      return fail_data("missing field `" + std::string(fields[k].name) + "`");
    }
  }
  return true;
}

}  // namespace lm
