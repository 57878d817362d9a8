// jinja2's lexer behaviour that chat templates depend on: newlines normalized and one trailing
// newline dropped (keep_trailing_newline=False), `-`/`+` markers, lstrip_blocks for {% and {#,
// trim_blocks after %} and #}.
#include "template/lexer.h"

#include <cctype>
#include <cstring>

#include "base/utf8.h"
#include "template/value.h"

namespace lm::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) : src_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t start = find_tag(pos_);
      std::string text = src_.substr(pos_, start - pos_);
      if (start == src_.size()) {
        emit_text(text);
        break;
      }
      const char type = src_[start + 1];  // '{', '%' or '#'
      const char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && is_space(text[end - 1])) --end;
        text.resize(end);
      } else if (sign != '+' && type != '{') {
        const size_t line_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (line_pos > 0 || line_starting) {
          bool only_blank = true;
          for (size_t i = line_pos; i < text.size(); ++i) {
            if (text[i] != ' ' && text[i] != '\t') only_blank = false;
          }
          if (only_blank) text.resize(line_pos);
        }
      }
      emit_text(text);
      line_ += count_newlines(pos_, start);
      pos_ = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (type == '#') {
        lex_comment();
      } else if (type == '%' && try_raw()) {
      } else {
        lex_tag(type == '{');
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({Token::Kind::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return src_.size();
  }

  int count_newlines(size_t a, size_t b) const {
    int n = 0;
    for (size_t i = a; i < b && i < src_.size(); ++i) n += src_[i] == '\n';
    return n;
  }

  void emit_text(const std::string& text) {
    if (!text.empty()) tokens_.push_back({Token::Kind::kText, text, line_});
  }

  // After a block or comment end: `-` strips all following whitespace, `+` nothing, else one \n.
  void after_block_end(char sign) {
    if (sign == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        line_ += src_[pos_] == '\n';
        ++pos_;
      }
    } else if (sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++line_;
      ++pos_;
    }
  }

  void lex_comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail("Missing end of comment tag");
    const char sign =
        end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    line_ += count_newlines(pos_, end);
    pos_ = end + 2;
    after_block_end(sign);
  }

  // {% raw %}...{% endraw %}: the body is text.
  bool try_raw() {
    size_t p = pos_;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (p < src_.size() && src_[p] == '-') ++p;
    if (src_.compare(p, 2, "%}") != 0) return false;
    const bool strip_after = src_[p - 1] == '-';
    p += 2;
    size_t search = p;
    while (true) {
      const size_t open = src_.find("{%", search);
      if (open == std::string::npos) fail("Missing end of raw directive");
      size_t q = open + 2;
      const bool strip_before = q < src_.size() && src_[q] == '-';
      if (strip_before || (q < src_.size() && src_[q] == '+')) ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") == 0) {
        std::string body = src_.substr(p, open - p);
        if (strip_after) {
          size_t b = 0;
          while (b < body.size() && is_space(body[b])) ++b;
          body.erase(0, b);
        }
        if (strip_before) {
          while (!body.empty() && is_space(body.back())) body.pop_back();
        }
        emit_text(body);
        const size_t close = src_.find("%}", q);
        if (close == std::string::npos) fail("Missing end of raw directive");
        const char sign = src_[close - 1] == '-' || src_[close - 1] == '+' ? src_[close - 1] : '\0';
        line_ += count_newlines(pos_, close);
        pos_ = close + 2;
        after_block_end(sign);
        return true;
      }
      search = open + 2;
    }
  }

  void lex_tag(bool variable) {
    tokens_.push_back({variable ? Token::Kind::kVarBegin : Token::Kind::kBlockBegin, "", line_});
    const char close = variable ? '}' : '%';
    int depth = 0;  // brackets: `}}` inside a dict literal is not the tag end
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) {
        line_ += src_[pos_] == '\n';
        ++pos_;
      }
      if (pos_ >= src_.size())
        fail(variable ? "unexpected end of template, expected 'end of print statement'."
                      : "unexpected end of template, expected 'end of statement block'.");
      const char c = src_[pos_];
      const char n = pos_ + 1 < src_.size() ? src_[pos_ + 1] : '\0';
      const char n2 = pos_ + 2 < src_.size() ? src_[pos_ + 2] : '\0';
      if (depth == 0) {
        if ((c == '-' || c == '+') && n == close && n2 == '}') {
          pos_ += 3;
          tokens_.push_back({variable ? Token::Kind::kVarEnd : Token::Kind::kBlockEnd, "", line_});
          if (!variable || c == '-') after_block_end(c);
          return;
        }
        if (c == close && n == '}') {
          pos_ += 2;
          tokens_.push_back({variable ? Token::Kind::kVarEnd : Token::Kind::kBlockEnd, "", line_});
          if (!variable) after_block_end('\0');
          return;
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t end = pos_;
        while (end < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_'))
          ++end;
        tokens_.push_back({Token::Kind::kName, src_.substr(pos_, end - pos_), line_});
        pos_ = end;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                     "/",  "%",  "~",  "<",  ">",  "=",  ".", ",", ":",
                                     "|",  "(",  ")",  "[",  "]",  "{",  "}"};
        bool matched = false;
        for (const char* op : kOps) {
          if (src_.compare(pos_, std::strlen(op), op) == 0) {
            if (op[0] == '(' || op[0] == '[' || op[0] == '{') ++depth;
            if ((op[0] == ')' || op[0] == ']' || op[0] == '}') && depth > 0) --depth;
            tokens_.push_back({Token::Kind::kOp, op, line_});
            pos_ += std::strlen(op);
            matched = true;
            break;
          }
        }
        if (!matched) fail(std::string("unexpected char '") + c + "' at " + std::to_string(pos_));
      }
    }
  }

  void lex_number() {
    size_t end = pos_;
    bool is_float = false;
    while (end < src_.size() &&
           (std::isdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_'))
      ++end;
    if (end + 1 < src_.size() && src_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      is_float = true;
      ++end;
      while (end < src_.size() && std::isdigit(static_cast<unsigned char>(src_[end]))) ++end;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        is_float = true;
        end = e;
        while (end < src_.size() && std::isdigit(static_cast<unsigned char>(src_[end]))) ++end;
      }
    }
    std::string text;
    for (size_t i = pos_; i < end; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    tokens_.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, text, line_});
    pos_ = end;
  }

  // Python string-literal escapes, as jinja2 decodes them.
  void lex_string(char quote) {
    std::string out;
    size_t i = pos_ + 1;
    while (true) {
      if (i >= src_.size()) fail("unexpected char '" + std::string(1, quote) + "'");
      const char c = src_[i];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || i + 1 >= src_.size()) {
        out += c;
        ++i;
        continue;
      }
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case '0':
          out += '\0';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\n':
          break;
        case 'x':
        case 'u':
        case 'U': {
          // Exactly `len` hex digits, as Python reads them (std::stoul threw past the template's
          // end or on a non-digit, and took signs and spaces).
          const size_t len = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          uint32_t cp = 0;
          for (size_t k = 0; k < len; ++k) {
            const char h = i + k < src_.size() ? src_[i + k] : '\0';
            if (!std::isxdigit(static_cast<unsigned char>(h))) {
              fail(std::string("truncated \\") + e + std::string(len, 'X') + " escape");
            }
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                     ? h - '0'
                                                     : std::tolower(static_cast<unsigned char>(h)) -
                                                           'a' + 10);
          }
          if (cp > 0x10FFFF) fail("illegal Unicode character");
          i += len;
          append_utf8(out, cp);
          break;
        }
        default:
          out += '\\';
          out += e;
      }
    }
    tokens_.push_back({Token::Kind::kString, out, line_});
    pos_ = i + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace lm::jinja
