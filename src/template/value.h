// The values a template computes with: Python's None/bool/int/float/str/list/dict as jinja2 sees
// them, plus Undefined, callables (globals, macros, bound methods) and namespace objects.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace lm::jinja {

// Raised anywhere below ChatTemplate::render and turned into an Error at that boundary; the
// message is what Python jinja2 would say.
class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
[[noreturn]] inline void fail(const std::string& message) { throw TemplateError(message); }
// Python ints are unbounded, ours are 64-bit: a result that does not fit is this error, never a
// wrapped (undefined) value.
[[noreturn]] inline void integer_overflow() {
  fail("integer overflow: the result does not fit in 64 bits");
}
// int(x) for a float x: NaN and infinities raise as in Python, and so do values outside 64 bits.
int64_t float_to_int(double d);

class Value;
using List = std::vector<Value>;
// Lists and dicts nest at most this deep (JSON input stops at 256): printing, comparing and
// freeing a value recurse through it.
inline constexpr int kMaxValueDepth = 1000;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion-ordered, like Python dicts

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* find(const std::string& name) const;
  // positional[idx] or the keyword `name`, or nullptr.
  const Value* get(size_t idx, const std::string& name) const;
};

struct Callable {
  std::string name;
  std::function<Value(const CallArgs&)> call;
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kCallable,
    kNamespace
  };

  Value() = default;  // undefined
  static Value undefined(std::string hint) {
    Value v;
    v.str_ = std::move(hint);
    return v;
  }
  static Value none() { return Value(Kind::kNone); }
  Value(bool b) : kind_(Kind::kBool), int_(b) {}                      // NOLINT: implicit by design
  Value(int v) : kind_(Kind::kInt), int_(v) {}                        // NOLINT
  Value(int64_t v) : kind_(Kind::kInt), int_(v) {}                    // NOLINT
  Value(double v) : kind_(Kind::kFloat), float_(v) {}                 // NOLINT
  Value(std::string s) : kind_(Kind::kString), str_(std::move(s)) {}  // NOLINT
  Value(const char* s) : kind_(Kind::kString), str_(s) {}             // NOLINT
  Value(List l)                                                       // NOLINT: implicit by design
      : kind_(Kind::kList), depth_(depth_over(l)), list_(std::make_shared<List>(std::move(l))) {}
  Value(Dict d)  // NOLINT: implicit by design
      : kind_(Kind::kDict), depth_(depth_over(d)), dict_(std::make_shared<Dict>(std::move(d))) {}
  Value(Callable c)
      : kind_(Kind::kCallable), callable_(std::make_shared<Callable>(std::move(c))) {}  // NOLINT
  static Value make_namespace(Dict attrs) {
    Value v(std::move(attrs));
    v.kind_ = Kind::kNamespace;
    return v;
  }
  // A list that Python would hold as a generator (map/select results): tojson refuses it.
  static Value generator(List l) {
    Value v(std::move(l));
    v.generator_ = true;
    return v;
  }

  // A markupsafe.Markup string (from |safe or |escape): concatenation escapes the other side.
  static Value markup(std::string s) {
    Value v(std::move(s));
    v.markup_ = true;
    return v;
  }
  bool is_markup() const { return markup_; }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_generator() const { return generator_; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return str_; }  // string value, or an undefined's hint
  const List& list() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  Dict& mutable_dict() const { return *dict_; }  // namespaces only
  const Callable& callable() const { return *callable_; }

  // Dict/namespace lookup; nullptr when absent.
  const Value* find(const std::string& key) const;
  bool truthy() const;
  // Python's type(x).__name__ as jinja's messages use it ('str', 'list', 'dict', 'NoneType').
  std::string type_name() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  // 1 + the deepest element; TemplateError past kMaxValueDepth.
  static int depth_over(const List& items);
  static int depth_over(const Dict& items);

  Kind kind_ = Kind::kUndefined;
  // Nesting of lists, dicts and namespaces (0 for other values) when this value was made: a
  // namespace changes later, but never to hold a namespace (Evaluator::exec_set).
  int depth_ = 0;
  bool generator_ = false;
  bool markup_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> callable_;
};

// Dict keys are strings; other keys (ints, None, bools) are stored encoded, with a \x01 prefix.
std::string dict_key(const Value& key);
Value dict_key_value(const std::string& key);

// Python str(x) (what {{ x }} prints; lists and dicts print as their repr) and repr(x).
std::string to_str(const Value& v);
std::string to_repr(const Value& v);
std::string float_repr(double d);
std::string html_escape(const std::string& s);  // markupsafe.escape
bool values_equal(const Value& a, const Value& b);
// Python's a < b for numbers, strings and lists; raises TypeError-like messages otherwise.
int compare_values(const Value& a, const Value& b, const char* op);

}  // namespace lm::jinja
