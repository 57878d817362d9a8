// Filters, tests, globals and methods with the behaviour (and error wording) of jinja2 3.1 in
// transformers' ImmutableSandboxedEnvironment. Strings index and measure in code points.
#include "template/builtins.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "template/evaluator.h"
#include "template/json_value.h"

namespace lm::jinja {
namespace {

std::atomic<int64_t> g_fixed_time{INT64_MIN};

// --- UTF-8 helpers: byte offsets of each code point.
std::vector<size_t> char_starts(const std::string& s) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  return starts;
}
std::vector<std::string> chars_of(const std::string& s) {
  std::vector<size_t> st = char_starts(s);
  std::vector<std::string> out;
  for (size_t i = 0; i < st.size(); ++i)
    out.push_back(s.substr(st[i], (i + 1 < st.size() ? st[i + 1] : s.size()) - st[i]));
  return out;
}

bool is_py_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
         (c >= 0x1c && c <= 0x1f);
}

std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (!chars || chars->is_none() || chars->is_undefined()) {
    if (left)
      while (b < e && is_py_space(s[b])) ++b;
    if (right)
      while (e > b && is_py_space(s[e - 1])) --e;
    return s.substr(b, e - b);
  }
  if (!chars->is_string()) fail("strip arg must be None or str");
  const std::vector<std::string> set = chars_of(chars->str());
  auto in_set = [&](const std::string& ch) {
    return std::find(set.begin(), set.end(), ch) != set.end();
  };
  std::vector<std::string> cs = chars_of(s);
  size_t lb = 0, le = cs.size();
  if (left)
    while (lb < le && in_set(cs[lb])) ++lb;
  if (right)
    while (le > lb && in_set(cs[le - 1])) --le;
  std::string out;
  for (size_t i = lb; i < le; ++i) out += cs[i];
  return out;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string py_title(const std::string& s) {  // str.title(): letters after a non-letter go upper
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    if (alpha)
      c = static_cast<char>(prev_cased ? std::tolower(static_cast<unsigned char>(c))
                                       : std::toupper(static_cast<unsigned char>(c)));
    prev_cased = alpha;
  }
  return out;
}
std::string capitalize(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count, Evaluator& ev) {
  std::string out;
  if (from.empty()) {
    std::vector<std::string> cs = chars_of(s);
    int64_t n = 0;
    for (const auto& c : cs) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      out += c;
      ev.check_size(out.size());
    }
    if (count < 0 || n < count) out += to;
    ev.check_size(out.size());
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (true) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos || (count >= 0 && n >= count)) break;
    out.append(s, pos, hit - pos);
    out += to;
    ev.check_size(out.size());
    pos = hit + from.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

List split_string(const std::string& s, const Value* sep, int64_t maxsplit) {
  List out;
  if (!sep || sep->is_none()) {
    size_t i = 0;
    int64_t n = 0;
    while (true) {
      while (i < s.size() && is_py_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && n >= maxsplit) {
        size_t e = s.size();
        while (e > i && is_py_space(s[e - 1])) --e;
        out.emplace_back(s.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_py_space(s[j])) ++j;
      out.emplace_back(s.substr(i, j - i));
      ++n;
      i = j;
    }
    return out;
  }
  if (!sep->is_string()) fail("must be str or None, not " + sep->type_name());
  const std::string& d = sep->str();
  if (d.empty()) fail("empty separator");
  size_t pos = 0;
  int64_t n = 0;
  while (true) {
    size_t hit = s.find(d, pos);
    if (hit == std::string::npos || (maxsplit >= 0 && n >= maxsplit)) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
    ++n;
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> split_lines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
      size_t end = i + 1;
      if (c == '\r' && end < s.size() && s[end] == '\n') ++end;
      out.push_back(s.substr(start, (keepends ? end : i) - start));
      start = i = end;
    } else {
      ++i;
    }
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

int64_t to_int_arg(const Value* v, int64_t def) {
  if (!v || v->is_none() || v->is_undefined()) return def;
  if (v->is_int() || v->is_bool()) return v->as_int();
  if (v->is_float()) return float_to_int(v->as_double());
  fail("'" + v->type_name() + "' object cannot be interpreted as an integer");
}

std::string require_str(const Value& v, const char* what) {
  if (!v.is_string()) fail(std::string(what) + " must be str, not " + v.type_name());
  return v.str();
}

// Python str.format with {} / {0} / {name} fields (no format specs beyond the name).
std::string py_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      const size_t close = fmt.find('}', i);
      if (close == std::string::npos) fail("Single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, close - i - 1);
      const size_t colon = field.find(':');
      if (colon != std::string::npos) field = field.substr(0, colon);
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_idx < args.positional.size() ? &args.positional[auto_idx] : nullptr;
        ++auto_idx;
        if (!v)
          fail("Replacement index " + std::to_string(auto_idx - 1) +
               " out of range for positional args tuple");
      } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
        // Leading digits, saturating: any index past the arguments is out of range.
        size_t idx = 0;
        for (size_t k = 0; k < field.size() && std::isdigit(static_cast<unsigned char>(field[k]));
             ++k) {
          idx = idx > args.positional.size() ? idx : idx * 10 + static_cast<size_t>(field[k] - '0');
        }
        if (idx >= args.positional.size())
          fail("Replacement index " + field + " out of range for positional args tuple");
        v = &args.positional[idx];
      } else {
        v = args.find(field);
        if (!v) fail("'" + field + "'");
      }
      out += to_str(*v);
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

// printf-style "%s %d" formatting (the format filter and str % args).
std::string percent_format(const std::string& fmt, const List& args) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      out += fmt[i];
      continue;
    }
    const char spec = fmt[++i];
    if (spec == '%') {
      out += '%';
      continue;
    }
    if (next >= args.size()) fail("not enough arguments for format string");
    const Value& v = args[next++];
    if (spec == 'd' || spec == 'i') {
      out += std::to_string(v.is_float() ? float_to_int(v.as_double()) : v.as_int());
    } else if (spec == 'r') {
      out += to_repr(v);
    } else {
      out += to_str(v);
    }
  }
  if (next < args.size()) fail("not all arguments converted during string formatting");
  return out;
}

Value attr_path(Evaluator& ev, const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        })) {
      // strtoll saturates: an index too large for 64 bits is out of range like any other.
      cur = get_item(ev, cur, Value(static_cast<int64_t>(std::strtoll(part.c_str(), nullptr, 10))));
    } else {
      cur = get_item(ev, cur, Value(part));
    }
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value bound(const std::string& name, std::function<Value(const CallArgs&)> fn) {
  return Value(Callable{name, std::move(fn)});
}

bool is_unsafe_method(const Value& obj, const std::string& name) {
  static const char* kList[] = {"append", "clear",  "extend",  "insert",
                                "pop",    "remove", "reverse", "sort"};
  static const char* kDict[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (obj.is_list()) {
    for (const char* m : kList)
      if (name == m) return true;
  }
  if (obj.is_dict()) {
    for (const char* m : kDict)
      if (name == m) return true;
  }
  return false;
}

Value string_method(Evaluator& ev, const std::string& s, const std::string& name) {
  auto m = [&](std::function<Value(const CallArgs&)> fn) { return bound(name, std::move(fn)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return m(
        [s, l, r](const CallArgs& a) { return Value(strip_chars(s, a.get(0, "chars"), l, r)); });
  }
  if (name == "upper") return m([s](const CallArgs&) { return Value(ascii_upper(s)); });
  if (name == "lower") return m([s](const CallArgs&) { return Value(ascii_lower(s)); });
  if (name == "title") return m([s](const CallArgs&) { return Value(py_title(s)); });
  if (name == "capitalize") return m([s](const CallArgs&) { return Value(capitalize(s)); });
  if (name == "split" || name == "rsplit") {
    return m([s](const CallArgs& a) {
      return Value(split_string(s, a.get(0, "sep"), to_int_arg(a.get(1, "maxsplit"), -1)));
    });
  }
  if (name == "splitlines") {
    return m([s](const CallArgs& a) {
      List out;
      const Value* k = a.get(0, "keepends");
      for (auto& line : split_lines(s, k && k->truthy())) out.emplace_back(line);
      return Value(std::move(out));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool starts = name == "startswith";
    return m([s, starts](const CallArgs& a) {
      if (a.positional.empty()) fail("startswith() takes at least 1 argument (0 given)");
      List options = a.positional[0].is_list() ? a.positional[0].list() : List{a.positional[0]};
      for (const auto& o : options) {
        if (!o.is_string())
          fail(std::string(starts ? "startswith" : "endswith") +
               " first arg must be str or a tuple of str, not " + o.type_name());
        const std::string& p = o.str();
        if (p.size() <= s.size() && (starts ? s.compare(0, p.size(), p) == 0
                                            : s.compare(s.size() - p.size(), p.size(), p) == 0))
          return Value(true);
      }
      return Value(false);
    });
  }
  if (name == "replace") {
    return m([s, &ev](const CallArgs& a) {
      if (a.positional.size() < 2) fail("replace expected at least 2 arguments");
      return Value(replace_all(s, require_str(a.positional[0], "replace() argument 1"),
                               require_str(a.positional[1], "replace() argument 2"),
                               to_int_arg(a.get(2, "count"), -1), ev));
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return m([s, name](const CallArgs& a) {
      if (a.positional.empty()) fail(name + "() takes at least 1 argument (0 given)");
      const std::string sub = require_str(a.positional[0], "must be str,");
      if (name == "count") {
        if (sub.empty()) return Value(static_cast<int64_t>(char_starts(s).size() + 1));
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value(n);
      }
      const size_t hit = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
      if (hit == std::string::npos) {
        if (name == "index" || name == "rindex") fail("substring not found");
        return Value(static_cast<int64_t>(-1));
      }
      int64_t cp = 0;
      for (size_t i = 0; i < hit; ++i) cp += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
      return Value(cp);
    });
  }
  if (name == "join") {
    return m([s, &ev](const CallArgs& a) {
      if (a.positional.empty()) fail("join() takes exactly one argument (0 given)");
      std::string out;
      bool first = true;
      for (const auto& x : iterate(a.positional[0])) {
        if (!x.is_string())
          fail("sequence item: expected str instance, " + x.type_name() + " found");
        if (!first) out += s;
        first = false;
        out += x.str();
        ev.check_size(out.size());
      }
      return Value(out);
    });
  }
  if (name == "format") return m([s](const CallArgs& a) { return Value(py_format(s, a)); });
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal" || name == "isalpha" ||
      name == "isalnum" || name == "isspace" || name == "isupper" || name == "islower") {
    return m([s, name](const CallArgs&) {
      if (s.empty()) return Value(false);
      bool any_cased = false;
      for (unsigned char c : s) {
        if (name == "isspace") {
          if (!is_py_space(static_cast<char>(c))) return Value(false);
        } else if (name == "isalpha") {
          if (!std::isalpha(c)) return Value(false);
        } else if (name == "isalnum") {
          if (!std::isalnum(c)) return Value(false);
        } else if (name == "isupper" || name == "islower") {
          if (std::isalpha(c)) {
            any_cased = true;
            if (name == "isupper" ? std::islower(c) : std::isupper(c)) return Value(false);
          }
        } else if (!std::isdigit(c)) {
          return Value(false);
        }
      }
      return Value(name == "isupper" || name == "islower" ? any_cased : true);
    });
  }
  return Value();
}

Value dict_method(const Value& obj, const std::string& name) {
  if (name == "items") {
    return bound(name, [obj](const CallArgs&) {
      List out;
      for (const auto& [k, v] : obj.dict()) out.emplace_back(List{dict_key_value(k), v});
      return Value(std::move(out));
    });
  }
  if (name == "keys") {
    return bound(name, [obj](const CallArgs&) {
      List out;
      for (const auto& kv : obj.dict()) out.push_back(dict_key_value(kv.first));
      return Value(std::move(out));
    });
  }
  if (name == "values") {
    return bound(name, [obj](const CallArgs&) {
      List out;
      for (const auto& kv : obj.dict()) out.push_back(kv.second);
      return Value(std::move(out));
    });
  }
  if (name == "get") {
    return bound(name, [obj](const CallArgs& a) {
      if (a.positional.empty()) fail("get expected at least 1 argument, got 0");
      const Value& key = a.positional[0];
      if (const Value* v = obj.find(dict_key(key))) return *v;
      return a.positional.size() > 1 ? a.positional[1] : Value::none();
    });
  }
  if (name == "copy") return bound(name, [obj](const CallArgs&) { return Value(obj.dict()); });
  return Value();
}

Value list_method(const Value& obj, const std::string& name) {
  if (name == "index" || name == "count") {
    return bound(name, [obj, name](const CallArgs& a) {
      if (a.positional.empty()) fail(name + " expected 1 argument, got 0");
      int64_t n = 0;
      for (size_t i = 0; i < obj.list().size(); ++i) {
        if (values_equal(obj.list()[i], a.positional[0])) {
          if (name == "index") return Value(static_cast<int64_t>(i));
          ++n;
        }
      }
      if (name == "index") fail(to_repr(a.positional[0]) + " is not in list");
      return Value(n);
    });
  }
  if (name == "copy") return bound(name, [obj](const CallArgs&) { return Value(obj.list()); });
  return Value();
}

std::string obj_type_repr(const Value& obj) {
  if (obj.is_none()) return "None";
  return obj.type_name() + " object";
}

int64_t normalize_index(int64_t idx, int64_t len) { return idx < 0 ? idx + len : idx; }

Value select_common(Evaluator& ev, const Value& value, const CallArgs& args, bool use_attr,
                    bool select) {
  List out;
  const size_t first_test_arg = use_attr ? 1 : 0;
  std::string attr;
  if (use_attr) {
    if (args.positional.empty()) fail("Missing parameter for attribute name");
    attr = to_str(args.positional[0]);
  }
  const bool has_test = args.positional.size() > first_test_arg;
  CallArgs test_args;
  for (size_t i = first_test_arg + 1; i < args.positional.size(); ++i)
    test_args.positional.push_back(args.positional[i]);
  if (!value.truthy()) return Value::generator({});
  for (const auto& item : iterate(value)) {
    ev.charge(1);
    const Value subject = use_attr ? attr_path(ev, item, attr) : item;
    const bool ok = has_test
                        ? ev.apply_test(to_str(args.positional[first_test_arg]), subject, test_args)
                        : subject.truthy();
    if (ok == select) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

void sort_values(List& items, bool reverse, bool case_sensitive,
                 const std::function<Value(const Value&)>& key) {
  auto norm = [&](const Value& v) {
    Value k = key(v);
    if (!case_sensitive && k.is_string()) return Value(ascii_lower(k.str()));
    return k;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int c = compare_values(norm(a), norm(b), "<");
    return reverse ? c > 0 : c < 0;
  });
}

std::string format_time(const std::string& fmt) {
  std::time_t t = g_fixed_time.load() == INT64_MIN ? std::time(nullptr)
                                                   : static_cast<std::time_t>(g_fixed_time.load());
  std::tm tm{};
  localtime_r(&t, &tm);
  if (g_fixed_time.load() != INT64_MIN) gmtime_r(&t, &tm);
  std::string out(256 + fmt.size() * 8, '\0');
  const size_t n = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
  out.resize(n);
  return out;
}

}  // namespace

void set_strftime_now_for_testing(std::optional<std::time_t> fixed) {
  g_fixed_time.store(fixed ? static_cast<int64_t>(*fixed) : INT64_MIN);
}

void undefined_error(const Value& undefined) { fail(undefined.str()); }

int64_t py_len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return static_cast<int64_t>(char_starts(v.str()).size());
    case Value::Kind::kList:
      if (v.is_generator()) fail("object of type 'generator' has no len()");
      return static_cast<int64_t>(v.list().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().size());
    case Value::Kind::kUndefined:
      return 0;
    default:
      fail("object of type '" + v.type_name() + "' has no len()");
  }
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
      return v.list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& kv : v.dict()) keys.push_back(dict_key_value(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      List out;
      for (auto& c : chars_of(v.str())) out.emplace_back(c);
      return out;
    }
    case Value::Kind::kUndefined:
      return {};
    default:
      fail("'" + v.type_name() + "' object is not iterable");
  }
}

Value get_attr(Evaluator& ev, const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (is_unsafe_method(obj, name)) {
    const std::string msg =
        "access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.";
    return bound(name, [msg](const CallArgs&) -> Value { fail(msg); });
  }
  Value method;
  if (obj.is_string()) method = string_method(ev, obj.str(), name);
  if (obj.is_dict()) method = dict_method(obj, name);
  if (obj.is_list() && !obj.is_generator()) method = list_method(obj, name);
  if (!method.is_undefined()) return method;
  if (obj.is_dict() || obj.is_namespace()) {
    if (const Value* v = obj.find(name)) return *v;
  }
  return Value::undefined("'" + obj_type_repr(obj) + "' has no attribute '" + name + "'");
}

Value get_item(Evaluator& ev, const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_dict() || obj.is_namespace()) {
    if (const Value* v = obj.find(dict_key(key))) return *v;
    if (key.is_string()) return get_attr(ev, obj, key.str());
  }
  if ((obj.is_list() && !obj.is_generator()) || obj.is_string()) {
    if (key.is_int() || key.is_bool()) {
      const int64_t len = py_len(obj);
      const int64_t idx = normalize_index(key.as_int(), len);
      if (idx >= 0 && idx < len) {
        if (obj.is_list()) return obj.list()[static_cast<size_t>(idx)];
        return Value(chars_of(obj.str())[static_cast<size_t>(idx)]);
      }
      return Value::undefined(obj_type_repr(obj) + " has no element " +
                              std::to_string(key.as_int()));
    }
  }
  if (key.is_string()) return get_attr(ev, obj, key.str());
  return Value::undefined("'" + obj_type_repr(obj) + "' has no attribute " + to_repr(key));
}

Value slice_value(Evaluator& ev, const Value& obj, const Value& start, const Value& stop,
                  const Value& step_v) {
  if (obj.is_undefined()) undefined_error(obj);
  const bool is_str = obj.is_string();
  if (!is_str && !(obj.is_list() && !obj.is_generator()))
    fail("'" + obj.type_name() + "' object is not subscriptable");
  std::vector<std::string> cs;
  if (is_str) cs = chars_of(obj.str());
  const int64_t len =
      is_str ? static_cast<int64_t>(cs.size()) : static_cast<int64_t>(obj.list().size());
  const int64_t step = to_int_arg(&step_v, 1);
  if (step == 0) fail("slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t def) {
    if (v.is_none() || v.is_undefined()) return def;
    int64_t i = to_int_arg(&v, 0);
    if (i < 0) i += len;
    if (step > 0) return std::clamp<int64_t>(i, 0, len);
    return std::clamp<int64_t>(i, -1, len - 1);
  };
  const int64_t b = clamp(start, step > 0 ? 0 : len - 1);
  const int64_t e = clamp(stop, step > 0 ? len : -1);
  std::string s_out;
  List l_out;
  for (int64_t i = b; step > 0 ? i < e : i > e;) {
    if (is_str) {
      s_out += cs[static_cast<size_t>(i)];
    } else {
      l_out.push_back(obj.list()[static_cast<size_t>(i)]);
    }
    if (__builtin_add_overflow(i, step, &i)) break;  // a step past 64 bits leaves the sequence
  }
  ev.charge(static_cast<int64_t>(l_out.size() + s_out.size() / 64));
  return is_str ? Value(std::move(s_out)) : Value(std::move(l_out));
}

bool call_test(Evaluator& ev, const std::string& name, const Value& v, const CallArgs& args) {
  const Value* arg = args.get(0, "value");
  auto need_arg = [&]() -> const Value& {
    if (!arg) fail("test '" + name + "' needs an argument");
    return *arg;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence")
    return v.is_string() || (v.is_list() && !v.is_generator()) || v.is_dict() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "odd" || name == "even") {
    if (!v.is_number()) fail("not all arguments converted during string formatting");
    const int64_t r = v.as_int() % 2;
    return name == "odd" ? r != 0 : r == 0;
  }
  if (name == "divisibleby") {
    const int64_t d = to_int_arg(&need_arg(), 1);
    if (d == 0) fail("integer division or modulo by zero");
    return d == -1 || v.as_int() % d == 0;  // INT64_MIN % -1 would trap
  }
  if (name == "eq" || name == "equalto" || name == "==") return values_equal(v, need_arg());
  if (name == "ne" || name == "!=") return !values_equal(v, need_arg());
  if (name == "lt" || name == "lessthan" || name == "<")
    return compare_values(v, need_arg(), "<") < 0;
  if (name == "le" || name == "<=") return compare_values(v, need_arg(), "<=") <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">")
    return compare_values(v, need_arg(), ">") > 0;
  if (name == "ge" || name == ">=") return compare_values(v, need_arg(), ">=") >= 0;
  if (name == "in") {
    const Value& c = need_arg();
    if (c.is_string()) return v.is_string() && c.str().find(v.str()) != std::string::npos;
    if (c.is_dict()) return c.find(dict_key(v)) != nullptr;
    for (const auto& x : iterate(c)) {
      if (values_equal(x, v)) return true;
    }
    return false;
  }
  if (name == "sameas") {
    const Value& o = need_arg();
    if (v.kind() != o.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == o.as_bool();
    return values_equal(v, o) && !v.is_list() && !v.is_dict();
  }
  if (name == "lower") return v.is_string() && ascii_lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && ascii_upper(v.str()) == v.str();
  if (name == "escaped") return false;
  (void)ev;
  fail("No test named '" + name + "'.");
}

Value call_filter(Evaluator& ev, const std::string& name, const Value& v, const CallArgs& args) {
  if (name == "tojson") {
    DumpOptions o;
    if (const Value* a = args.get(0, "ensure_ascii")) o.ensure_ascii = a->truthy();
    if (const Value* a = args.get(1, "indent"); a && !a->is_none()) {
      o.has_indent = true;
      const int64_t width = a->is_string() ? 0 : std::max<int64_t>(0, to_int_arg(a, 0));
      ev.check_size(static_cast<uint64_t>(width));
      o.indent = a->is_string() ? a->str() : std::string(static_cast<size_t>(width), ' ');
      o.item_separator = ",";
    }
    if (const Value* a = args.get(2, "separators"); a && !a->is_none()) {
      List parts = iterate(*a);
      if (parts.size() != 2) fail("separators must be a pair");
      o.item_separator = to_str(parts[0]);
      o.key_separator = to_str(parts[1]);
    }
    if (const Value* a = args.get(3, "sort_keys")) o.sort_keys = a->truthy();
    o.max_bytes = ev.limits().max_output_bytes;
    std::string out = dump_json(v, o);
    return Value(std::move(out));
  }
  if (name == "trim") return Value(strip_chars(to_str(v), args.get(0, "chars"), true, true));
  if (name == "length" || name == "count") return Value(py_len(v));
  if (name == "string") return v.is_string() ? v : Value(to_str(v));  // keeps Markup
  if (name == "safe") return Value::markup(to_str(v));
  if (name == "e" || name == "escape" || name == "forceescape") {
    if (v.is_markup() && name != "forceescape") return v;
    return Value::markup(html_escape(to_str(v)));
  }
  if (name == "default" || name == "d") {
    const Value* def = args.get(0, "default_value");
    const Value* boolean = args.get(1, "boolean");
    const bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
    if (use_default) return def ? *def : Value("");
    return v;
  }
  if (name == "upper") return Value(ascii_upper(to_str(v)));
  if (name == "lower") return Value(ascii_lower(to_str(v)));
  if (name == "capitalize") return Value(capitalize(to_str(v)));
  if (name == "title") {
    std::string s = to_str(v), out;
    bool word_start = true;
    for (char c : s) {
      const bool sep = is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      if (sep) {
        out += c;
        word_start = true;
      } else {
        out += static_cast<char>(word_start ? std::toupper(static_cast<unsigned char>(c))
                                            : std::tolower(static_cast<unsigned char>(c)));
        word_start = false;
      }
    }
    return Value(out);
  }
  if (name == "replace") {
    if (args.positional.size() < 2) fail("replace filter needs two arguments");
    return Value(replace_all(to_str(v), to_str(args.positional[0]), to_str(args.positional[1]),
                             to_int_arg(args.get(2, "count"), -1), ev));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::generator({});
    if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, x] : v.dict()) out.emplace_back(List{dict_key_value(k), x});
    return Value::generator(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) fail("dictsort expects a mapping");
    List out;
    for (const auto& [k, x] : v.dict()) out.emplace_back(List{dict_key_value(k), x});
    const Value* cs = args.get(0, "case_sensitive");
    const Value* by = args.get(1, "by");
    const Value* rev = args.get(2, "reverse");
    const size_t pos = by && by->is_string() && by->str() == "value" ? 1 : 0;
    sort_values(out, rev && rev->truthy(), cs && cs->truthy(),
                [pos](const Value& p) { return p.list()[pos]; });
    return Value(std::move(out));
  }
  if (name == "join") {
    const Value* sep = args.get(0, "d");
    const Value* attr = args.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const auto& x : iterate(v)) {
      if (!first && sep) out += to_str(*sep);
      first = false;
      out += to_str(attr ? attr_path(ev, x, to_str(*attr)) : x);
      ev.check_size(out.size());
    }
    return Value(out);
  }
  if (name == "map") {
    List out;
    if (!v.truthy()) return Value::generator({});
    if (const Value* attr = args.find("attribute")) {
      const Value* def = args.find("default");
      for (const auto& x : iterate(v)) {
        Value r = attr_path(ev, x, to_str(*attr));
        if (r.is_undefined() && def) r = *def;
        out.push_back(std::move(r));
      }
    } else {
      if (args.positional.empty()) fail("map requires a filter argument");
      CallArgs rest;
      rest.positional.assign(args.positional.begin() + 1, args.positional.end());
      rest.keyword = args.keyword;
      const std::string filter = to_str(args.positional[0]);
      for (const auto& x : iterate(v)) out.push_back(ev.apply_filter(filter, x, rest));
    }
    return Value::generator(std::move(out));
  }
  if (name == "select") return select_common(ev, v, args, false, true);
  if (name == "reject") return select_common(ev, v, args, false, false);
  if (name == "selectattr") return select_common(ev, v, args, true, true);
  if (name == "rejectattr") return select_common(ev, v, args, true, false);
  if (name == "first") {
    List items = iterate(v);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
  }
  if (name == "last") {
    if (v.is_generator()) fail("'generator' object is not reversible");
    List items = iterate(v);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
  }
  if (name == "list") return Value(iterate(v));
  if (name == "unique") {
    List out;
    const Value* attr = args.get(1, "attribute");
    for (const auto& x : iterate(v)) {
      ev.charge(static_cast<int64_t>(out.size()) + 1);  // compared with every kept item
      const Value k = attr ? attr_path(ev, x, to_str(*attr)) : x;
      bool seen = false;
      for (const auto& y : out) {
        const Value ky = attr ? attr_path(ev, y, to_str(*attr)) : y;
        auto lower = [](const Value& z) { return z.is_string() ? Value(ascii_lower(z.str())) : z; };
        if (values_equal(lower(k), lower(ky))) seen = true;
      }
      if (!seen) out.push_back(x);
    }
    return Value::generator(std::move(out));
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<std::string> cs = chars_of(v.str());
      std::string out;
      for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
      return Value(out);
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::generator(std::move(items));
  }
  if (name == "sort") {
    List items = iterate(v);
    const Value* rev = args.get(0, "reverse");
    const Value* cs = args.get(1, "case_sensitive");
    const Value* attr = args.get(2, "attribute");
    sort_values(items, rev && rev->truthy(), cs && cs->truthy(),
                [&](const Value& x) { return attr ? attr_path(ev, x, to_str(*attr)) : x; });
    return Value(std::move(items));
  }
  if (name == "min" || name == "max") {
    List items = iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    const Value* attr = args.get(1, "attribute");
    sort_values(items, name == "max", false,
                [&](const Value& x) { return attr ? attr_path(ev, x, to_str(*attr)) : x; });
    return items.front();
  }
  if (name == "sum") {
    const Value* attr = args.get(0, "attribute");
    const Value* start = args.get(1, "start");
    Value total = start ? *start : Value(static_cast<int64_t>(0));
    for (const auto& x : iterate(v)) {
      const Value y = attr ? attr_path(ev, x, to_str(*attr)) : x;
      if (!y.is_number() || !total.is_number())
        fail("unsupported operand type(s) for +: '" + total.type_name() + "' and '" +
             y.type_name() + "'");
      int64_t int_total = 0;
      if (total.is_float() || y.is_float()) {
        total = Value(total.as_double() + y.as_double());
      } else if (__builtin_add_overflow(total.as_int(), y.as_int(), &int_total)) {
        integer_overflow();
      } else {
        total = Value(int_total);
      }
    }
    return total;
  }
  if (name == "abs") {
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.is_number()) {
      if (v.as_int() == INT64_MIN) integer_overflow();
      return Value(static_cast<int64_t>(std::llabs(v.as_int())));
    }
    fail("bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (name == "round") {
    const int64_t precision = to_int_arg(args.get(0, "precision"), 0);
    const std::string method = args.get(1, "method") ? to_str(*args.get(1, "method")) : "common";
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = v.as_double() * scale;
    double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
    return Value(r / scale);
  }
  if (name == "int") {
    const int64_t def = to_int_arg(args.get(0, "default"), 0);
    if (v.is_int() || v.is_bool()) return Value(v.as_int());
    // jinja2's do_int: NaN (a ValueError) gives the default; infinity (OverflowError) raises.
    if (v.is_float())
      return std::isnan(v.as_double()) ? Value(def) : Value(float_to_int(v.as_double()));
    if (v.is_string()) {
      const std::string s = strip_chars(v.str(), nullptr, true, true);
      char* end = nullptr;
      const long long i = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end && *end == '\0') return Value(static_cast<int64_t>(i));
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == '\0')
        return std::isnan(d) ? Value(def) : Value(float_to_int(d));
    }
    return Value(def);
  }
  if (name == "float") {
    if (v.is_number()) return Value(v.as_double());
    if (v.is_string()) {
      char* end = nullptr;
      const double d = std::strtod(v.str().c_str(), &end);
      if (!v.str().empty() && end && *end == '\0') return Value(d);
    }
    const Value* def = args.get(0, "default");
    return def ? Value(def->as_double()) : Value(0.0);
  }
  if (name == "indent") {
    const Value* w = args.get(0, "width");
    const int64_t width = w && w->is_string() ? 0 : std::max<int64_t>(0, to_int_arg(w, 4));
    ev.check_size(static_cast<uint64_t>(width));
    const std::string ind =
        w && w->is_string() ? w->str() : std::string(static_cast<size_t>(width), ' ');
    const Value* first_v = args.get(1, "first");
    const Value* blank_v = args.get(2, "blank");
    std::vector<std::string> lines = split_lines(to_str(v) + "\n", false);
    std::string rv;
    if (blank_v && blank_v->truthy()) {
      for (size_t i = 0; i < lines.size(); ++i) {
        rv += (i ? "\n" + ind : "") + lines[i];
        ev.check_size(rv.size());
      }
    } else {
      rv = lines.empty() ? "" : lines[0];
      for (size_t i = 1; i < lines.size(); ++i) {
        rv += "\n" + (lines[i].empty() ? lines[i] : ind + lines[i]);
        ev.check_size(rv.size());
      }
    }
    if (first_v && first_v->truthy()) rv = ind + rv;
    ev.check_size(rv.size());
    return Value(rv);
  }
  if (name == "format") return Value(percent_format(to_str(v), args.positional));
  if (name == "wordcount")
    return Value(static_cast<int64_t>(split_string(to_str(v), nullptr, -1).size()));
  if (name == "center") {
    const int64_t width = to_int_arg(args.get(0, "width"), 80);
    std::string s = to_str(v);
    const int64_t len = static_cast<int64_t>(char_starts(s).size());
    if (width <= len) return Value(s);
    const int64_t total = std::min<int64_t>(width - len, 1 << 20);
    const int64_t left = total / 2 + (total & width & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + s +
                 std::string(static_cast<size_t>(total - left), ' '));
  }
  if (name == "batch") {
    const int64_t n = std::max<int64_t>(1, to_int_arg(args.get(0, "linecount"), 1));
    List out, cur;
    for (const auto& x : iterate(v)) {
      cur.push_back(x);
      if (static_cast<int64_t>(cur.size()) == n) {
        out.emplace_back(std::move(cur));
        cur.clear();
      }
    }
    if (!cur.empty()) out.emplace_back(std::move(cur));
    return Value::generator(std::move(out));
  }
  fail("No filter named '" + name + "'.");
}

void add_globals(std::unordered_map<std::string, Value>& globals) {
  globals["raise_exception"] = bound("raise_exception", [](const CallArgs& a) -> Value {
    fail(a.positional.empty() ? std::string("") : to_str(a.positional[0]));
  });
  globals["strftime_now"] = bound("strftime_now", [](const CallArgs& a) {
    if (a.positional.empty())
      fail("strftime_now() missing 1 required positional argument: 'format'");
    return Value(format_time(to_str(a.positional[0])));
  });
  globals["range"] = bound("range", [](const CallArgs& a) {
    int64_t start = 0, stop = 0, step = 1;
    if (a.positional.size() == 1) {
      stop = to_int_arg(&a.positional[0], 0);
    } else if (a.positional.size() >= 2) {
      start = to_int_arg(&a.positional[0], 0);
      stop = to_int_arg(&a.positional[1], 0);
      if (a.positional.size() > 2) step = to_int_arg(&a.positional[2], 1);
    } else {
      fail("range expected at least 1 argument, got 0");
    }
    if (step == 0) fail("range() arg 3 must not be zero");
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      if (out.size() >= 1'000'000)
        fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      out.emplace_back(i);
      if (__builtin_add_overflow(i, step, &i)) break;  // past 64 bits: past `stop` too
    }
    if (out.size() > 100000)
      fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    return Value(std::move(out));
  });
  globals["namespace"] = bound("namespace", [](const CallArgs& a) {
    Dict attrs;
    for (const auto& p : a.positional) {
      if (p.is_dict()) attrs.insert(attrs.end(), p.dict().begin(), p.dict().end());
    }
    for (const auto& [k, v] : a.keyword) {
      if (!k.empty() && k[0] == '_') {
        fail(
            "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
            k + "'. Please rename the attribute.");
      }
      attrs.emplace_back(k, v);
    }
    return Value::make_namespace(std::move(attrs));
  });
  globals["dict"] = bound("dict", [](const CallArgs& a) {
    Dict d;
    for (const auto& p : a.positional) {
      if (p.is_dict()) d.insert(d.end(), p.dict().begin(), p.dict().end());
    }
    for (const auto& [k, v] : a.keyword) d.emplace_back(k, v);
    return Value(std::move(d));
  });
}

}  // namespace lm::jinja
