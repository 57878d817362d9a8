// JSON text exactly as TGI's Rust stack writes it (see json_text.h).
#include "server/wire/json_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "base/utf8.h"

namespace lm {
namespace {

// Shortest round-trip digits of `value` (no sign) and the decimal exponent of the first digit:
// value = 0.d1d2d3... x 10^(exponent + 1).
template <typename T>
void shortest_digits(T value, std::string& digits, int& exponent) {
  char buf[64];
  auto [end, ec] =
      std::to_chars(buf, buf + sizeof(buf), std::fabs(value), std::chars_format::scientific);
  (void)ec;
  std::string_view s(buf, static_cast<size_t>(end - buf));
  const size_t e = s.find('e');
  digits.clear();
  for (char c : s.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  exponent = std::atoi(std::string(s.substr(e + 1)).c_str());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
}

}  // namespace

std::string json_f32(float value) {
  if (!std::isfinite(value)) return "null";
  std::string out = std::signbit(value) ? "-" : "";
  if (value == 0.0f) return out + "0.0";
  std::string digits;
  int exponent = 0;
  shortest_digits(value, digits, exponent);
  // ryu's pretty::format32 layout, with k = exponent of the last digit and kk = point position.
  const int length = static_cast<int>(digits.size());
  const int kk = exponent + 1;
  const int k = kk - length;
  if (k >= 0 && kk <= 13) {
    out += digits + std::string(static_cast<size_t>(k), '0') + ".0";
  } else if (kk > 0 && kk <= 13) {
    out += digits.substr(0, static_cast<size_t>(kk)) + "." + digits.substr(static_cast<size_t>(kk));
  } else if (kk > -6 && kk <= 0) {
    out += "0." + std::string(static_cast<size_t>(-kk), '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (length > 1) out += "." + digits.substr(1);
    out += "e" + std::to_string(kk - 1);
  }
  return out;
}

std::string rust_f64_display(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string out = std::signbit(value) ? "-" : "";
  if (value == 0.0) return out + "0";
  std::string digits;
  int exponent = 0;
  shortest_digits(value, digits, exponent);
  const int length = static_cast<int>(digits.size());
  const int kk = exponent + 1;  // digits before the decimal point
  if (kk <= 0) {
    out += "0." + std::string(static_cast<size_t>(-kk), '0') + digits;
  } else if (kk >= length) {
    out += digits + std::string(static_cast<size_t>(kk - length), '0');
  } else {
    out += digits.substr(0, static_cast<size_t>(kk)) + "." + digits.substr(static_cast<size_t>(kk));
  }
  return out;
}

std::string rust_debug_str(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_valid_len(text, i);
    if (len > 1) {
      // C1 controls (U+0080..U+009F) are escaped by Rust; other non-ASCII is printed as is.
      const auto b1 = static_cast<unsigned char>(text[i + 1]);
      if (static_cast<unsigned char>(text[i]) == 0xC2 && b1 < 0xA0) {
        char buf[16];
        std::snprintf(buf, sizeof(buf), "\\u{%x}", b1);
        out += buf;
      } else {
        out.append(text.substr(i, len));
      }
      i += len;
      continue;
    }
    const auto c = static_cast<unsigned char>(text[i++]);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\0':
        out += "\\0";
        break;
      default:
        if (c < 0x20 || c == 0x7F || len == 0) {
          char buf[16];
          std::snprintf(buf, sizeof(buf), "\\u{%x}", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

}  // namespace lm
