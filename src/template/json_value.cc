// Python's json.dumps output byte for byte: ", "/": " separators (", " becomes "," with an
// indent), \uXXXX escapes (surrogate pairs with ensure_ascii), float repr, NaN/Infinity.
#include "template/json_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace lm::jinja {
namespace {

using OrderedJson = nlohmann::ordered_json;
constexpr int kMaxDepth = 256;

void append_escaped(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    char buf[16];
    if (c < 0x20) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
    } else {
      uint32_t cp = 0;
      int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
      cp = c & (0x3F >> extra);
      for (int k = 0; k < extra && i + 1 < s.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[++i]) & 0x3F);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10),
                      0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
    }
  }
  out += '"';
}

// json.dumps turns int/float/bool/None keys into "4096", "1.5", "true", "null".
std::string json_key(const std::string& key) {
  const Value k = dict_key_value(key);
  if (k.is_string()) return k.str();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_none()) return "null";
  return to_str(k);
}

void dump(std::string& out, const Value& v, const DumpOptions& o, int depth) {
  if (depth > kMaxDepth) fail("Circular reference detected");
  if (out.size() > o.max_bytes) fail("template output exceeded its size limit");
  auto newline = [&](int level) {
    if (!o.has_indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) {
      out += o.indent;
      if (out.size() > o.max_bytes) fail("template output exceeded its size limit");
    }
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                             : float_repr(d);
      return;
    }
    case Value::Kind::kString:
      append_escaped(out, v.str(), o.ensure_ascii);
      return;
    case Value::Kind::kList: {
      if (v.is_generator()) fail("Object of type generator is not JSON serializable");
      if (v.list().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) out += o.item_separator;
        newline(depth + 1);
        dump(out, v.list()[i], o, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict().empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& kv : v.dict()) entries.push_back(&kv);
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += o.item_separator;
        newline(depth + 1);
        append_escaped(out, json_key(entries[i]->first), o.ensure_ascii);
        out += o.key_separator;
        dump(out, entries[i]->second, o, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      fail("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

Value from_json(const OrderedJson& j, int depth) {
  if (depth > kMaxDepth) fail("JSON input is nested too deeply");
  switch (j.type()) {
    case OrderedJson::value_t::null:
      return Value::none();
    case OrderedJson::value_t::boolean:
      return Value(j.get<bool>());
    case OrderedJson::value_t::number_integer:
      return Value(j.get<int64_t>());
    case OrderedJson::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case OrderedJson::value_t::number_float:
      return Value(j.get<double>());
    case OrderedJson::value_t::string:
      return Value(j.get<std::string>());
    case OrderedJson::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x, depth + 1));
      return Value(std::move(items));
    }
    case OrderedJson::value_t::object: {
      Dict d;
      d.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it)
        d.emplace_back(it.key(), from_json(it.value(), depth + 1));
      return Value(std::move(d));
    }
    default:
      return Value::none();
  }
}

}  // namespace

std::string dump_json(const Value& v, const DumpOptions& options) {
  std::string out;
  dump(out, v, options, 0);
  if (out.size() > options.max_bytes) fail("template output exceeded its size limit");
  return out;
}

Value parse_json_value(const std::string& text, const std::string& what) {
  OrderedJson j = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(what + " is not valid JSON");
  return from_json(j, 0);
}

}  // namespace lm::jinja
