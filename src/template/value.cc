// Python semantics for template values: truthiness, str/repr, equality and ordering.
#include "template/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace lm::jinja {

int64_t float_to_int(double d) {
  if (std::isnan(d)) fail("cannot convert float NaN to integer");
  if (std::isinf(d)) fail("cannot convert float infinity to integer");
  // [-2^63, 2^63): the doubles whose truncation fits (2^63 itself does not).
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) integer_overflow();
  return static_cast<int64_t>(d);
}

int Value::depth_over(const List& items) {
  int deepest = 0;
  for (const Value& v : items) deepest = std::max(deepest, v.depth_);
  if (deepest >= kMaxValueDepth) fail("values nest deeper than " + std::to_string(kMaxValueDepth));
  return deepest + 1;
}

int Value::depth_over(const Dict& items) {
  int deepest = 0;
  for (const auto& entry : items) deepest = std::max(deepest, entry.second.depth_);
  if (deepest >= kMaxValueDepth) fail("values nest deeper than " + std::to_string(kMaxValueDepth));
  return deepest + 1;
}

const Value* CallArgs::find(const std::string& name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

const Value* CallArgs::get(size_t idx, const std::string& name) const {
  if (idx < positional.size()) return &positional[idx];
  return find(name);
}

const Value* Value::find(const std::string& key) const {
  if (!dict_) return nullptr;
  for (const auto& [k, v] : *dict_) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !str_.empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->empty();
    default:
      return true;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return generator_ ? "generator" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kCallable:
      return "function";
    case Kind::kNamespace:
      return "Namespace";
  }
  return "object";
}

std::string dict_key(const Value& key) {
  if (key.is_string()) return key.str();
  if (key.is_bool()) return std::string("\x01b") + (key.as_bool() ? "1" : "0");
  if (key.is_int()) return "\x01i" + std::to_string(key.as_int());
  if (key.is_float()) return "\x01f" + float_repr(key.as_double());
  if (key.is_none()) return "\x01n";
  fail("unhashable type: '" + key.type_name() + "'");
}

Value dict_key_value(const std::string& key) {
  if (key.empty() || key[0] != '\x01') return Value(key);
  switch (key[1]) {
    case 'b':
      return Value(key[2] == '1');
    case 'i':
      return Value(static_cast<int64_t>(std::strtoll(key.c_str() + 2, nullptr, 10)));
    case 'f':
      return Value(std::strtod(key.c_str() + 2, nullptr));
    default:
      return Value::none();
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest digits that round-trip, then Python's layout: fixed for 1e-4 <= |d| < 1e16.
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  const size_t e_pos = s.find('e');
  const int exp = std::atoi(s.c_str() + e_pos + 1);
  std::string mantissa = s.substr(0, e_pos);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." +
            digits.substr(static_cast<size_t>(exp) + 1);
    }
  }
  if (out.empty()) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += e;
  }
  return negative ? "-" + out : out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

static std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string to_repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return repr_string(v.str());
    case Value::Kind::kList: {
      if (v.is_generator()) return "<generator object>";
      std::string out = "[";
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) out += ", ";
        out += to_repr(v.list()[i]);
      }
      return out + "]";
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.dict()) {
        if (!first) out += ", ";
        first = false;
        out += to_repr(dict_key_value(k)) + ": " + to_repr(x);
      }
      return out + "}";
    }
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return float_repr(v.as_double());
    case Value::Kind::kString:
      return v.str();
    case Value::Kind::kList:
    case Value::Kind::kDict:
      return to_repr(v);
    case Value::Kind::kCallable:
      return "<function " + v.callable().name + ">";
    case Value::Kind::kNamespace:
      return "<Namespace " + to_repr(Value(v.dict())) + ">";
  }
  return "";
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!values_equal(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, x] : a.dict()) {
        const Value* y = b.find(k);
        if (!y || !values_equal(x, *y)) return false;
      }
      return true;
    }
    default:
      return &a.callable() == &b.callable();
  }
}

int compare_values(const Value& a, const Value& b, const char* op) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const size_t n = std::min(a.list().size(), b.list().size());
    for (size_t i = 0; i < n; ++i) {
      if (!values_equal(a.list()[i], b.list()[i]))
        return compare_values(a.list()[i], b.list()[i], op);
    }
    return a.list().size() < b.list().size() ? -1 : (a.list().size() > b.list().size() ? 1 : 0);
  }
  fail(std::string("'") + op + "' not supported between instances of '" + a.type_name() +
       "' and '" + b.type_name() + "'");
}

}  // namespace lm::jinja
