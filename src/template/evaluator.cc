// Statement execution and expression evaluation with Python operator semantics.
#include "template/evaluator.h"

#include <cmath>

#include "template/builtins.h"

namespace lm::jinja {
namespace {

bool is_intlike(const Value& v) { return v.is_int() || v.is_bool(); }

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  fail(std::string("unsupported operand type(s) for ") + op + ": '" + a.type_name() + "' and '" +
       b.type_name() + "'");
}

// Python's a // b for b != 0; INT64_MIN // -1 does not fit.
int64_t floor_div(int64_t a, int64_t b) {
  if (b == -1) {
    if (a == INT64_MIN) integer_overflow();
    return -a;
  }
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// Python's a % b for b != 0 (the sign of b), without a - (a // b) * b, whose product can
// overflow (INT64_MAX % -2).
int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  const int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

// base ** exponent for exponent >= 0, by squaring (exponents may be huge for bases 0, 1, -1).
int64_t int_pow(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if ((exponent & 1) && __builtin_mul_overflow(result, base, &result)) integer_overflow();
    exponent >>= 1;
    if (exponent > 0 && __builtin_mul_overflow(base, base, &base)) integer_overflow();
  }
  return result;
}

}  // namespace

Evaluator::Evaluator(const std::unordered_map<std::string, Value>& globals, RenderLimits limits)
    : globals_(globals), limits_(limits) {}

std::string Evaluator::render(const Body& body) {
  std::string out;
  out_ = &out;
  frames_.assign(1, Frame{});
  exec_body(body);
  return out;
}

void Evaluator::charge(int64_t units) {
  work_ += units;
  if (work_ > limits_.max_work) fail("template rendering exceeded its work limit");
}

void Evaluator::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) fail("template output exceeded its size limit");
}

void Evaluator::emit(const std::string& text) {
  total_output_ += text.size();
  check_size(total_output_);
  out_->append(text);
}

std::string Evaluator::capture(const Body& body) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec_body(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Evaluator::Flow Evaluator::exec_body(const Body& body) {
  for (const auto& s : body) {
    const Flow flow = exec(*s);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec(const Stmt& s) {
  charge(1);
  switch (s.kind) {
    case Stmt::Kind::kText:
      emit(s.text);
      return Flow::kNormal;
    case Stmt::Kind::kOutput: {
      const Value v = eval(*s.expr);
      emit(to_str(v));
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        if (eval(*s.conditions[i]).truthy()) return exec_body(s.bodies[i]);
      }
      return exec_body(s.else_body);
    case Stmt::Kind::kFor: {
      Flow flow = Flow::kNormal;
      exec_for(s, flow);
      return Flow::kNormal;
    }
    case Stmt::Kind::kSet:
      exec_set(s);
      return Flow::kNormal;
    case Stmt::Kind::kSetBlock: {
      Value v(capture(s.body));
      if (s.filter) v = eval_filter_chain(*s.filter, v);
      assign(s.targets[0], std::move(v));
      return Flow::kNormal;
    }
    case Stmt::Kind::kMacro:
      assign(s.name, make_macro(s));
      return Flow::kNormal;
    case Stmt::Kind::kCallBlock: {
      const Expr& call = *s.expr;
      Value callee = eval(*call.args[0]);
      CallArgs args = eval_args(call, 1);
      std::vector<Frame> closure = frames_;
      const Stmt* stmt = &s;
      args.keyword.emplace_back("caller",
                                Value(Callable{"caller", [this, stmt, closure](const CallArgs& a) {
                                                 return call_macro(*stmt, closure, a);
                                               }}));
      if (!callee.is_callable()) fail("'" + to_str(callee) + "' object is not callable");
      emit(to_str(callee.callable().call(args)));
      return Flow::kNormal;
    }
    case Stmt::Kind::kFilterBlock: {
      const Value v = eval_filter_chain(*s.filter, Value(capture(s.body)));
      emit(to_str(v));
      return Flow::kNormal;
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kScope:
      return exec_body(s.body);
  }
  return Flow::kNormal;
}

void Evaluator::exec_for(const Stmt& s, Flow& flow) {
  const Value iterable = eval(*s.expr);
  List items = iterate(iterable);
  charge(static_cast<int64_t>(items.size()));
  if (s.filter) {
    List kept;
    for (auto& item : items) {
      frames_.emplace_back();
      if (s.targets.size() == 1) {
        frames_.back()[s.targets[0]] = item;
      } else if (item.is_list() && item.list().size() == s.targets.size()) {
        for (size_t t = 0; t < s.targets.size(); ++t) frames_.back()[s.targets[t]] = item.list()[t];
      }
      const bool keep = eval(*s.filter).truthy();
      frames_.pop_back();
      if (keep) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (s.has_else) exec_body(s.else_body);
    return;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    charge(4);  // an iteration builds a frame and the loop object
    const Value& item = items[static_cast<size_t>(i)];
    Frame frame;
    if (s.targets.size() == 1) {
      frame[s.targets[0]] = item;
    } else {
      List parts = iterate(item);
      if (parts.size() != s.targets.size()) {
        fail(parts.size() < s.targets.size()
                 ? "not enough values to unpack (expected " + std::to_string(s.targets.size()) +
                       ", got " + std::to_string(parts.size()) + ")"
                 : "too many values to unpack (expected " + std::to_string(s.targets.size()) + ")");
      }
      for (size_t t = 0; t < s.targets.size(); ++t) frame[s.targets[t]] = parts[t];
    }
    Dict loop = {
        {"index", Value(i + 1)},
        {"index0", Value(i)},
        {"revindex", Value(n - i)},
        {"revindex0", Value(n - i - 1)},
        {"first", Value(i == 0)},
        {"last", Value(i == n - 1)},
        {"length", Value(n)},
        {"depth", Value(1)},
        {"depth0", Value(0)},
        {"previtem",
         i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item")},
        {"nextitem",
         i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item")},
    };
    loop.emplace_back(
        "cycle", Value(Callable{"cycle", [i](const CallArgs& a) {
                                  if (a.positional.empty()) fail("no items for cycling given");
                                  return a.positional[static_cast<size_t>(i) % a.positional.size()];
                                }}));
    frame["loop"] = Value(std::move(loop));
    frames_.push_back(std::move(frame));
    Flow body_flow;
    try {
      body_flow = exec_body(s.body);
    } catch (...) {
      frames_.pop_back();
      throw;
    }
    frames_.pop_back();
    if (body_flow == Flow::kBreak) break;
  }
  flow = Flow::kNormal;
}

void Evaluator::exec_set(const Stmt& s) {
  Value v = eval(*s.expr);
  if (!s.name.empty()) {
    const Value target = lookup(s.targets[0]);
    if (!target.is_namespace()) fail("cannot assign attribute on non-namespace object");
    check_storable_in_namespace(v);
    if (!s.name.empty() && s.name[0] == '_') {
      fail("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
           s.name + "'. Please rename the attribute.");
    }
    Dict& attrs = target.mutable_dict();
    for (auto& [k, x] : attrs) {
      if (k == s.name) {
        x = std::move(v);
        return;
      }
    }
    attrs.emplace_back(s.name, std::move(v));
    return;
  }
  if (s.targets.size() == 1) {
    assign(s.targets[0], std::move(v));
    return;
  }
  List parts = iterate(v);
  if (parts.size() != s.targets.size()) fail("not enough values to unpack");
  for (size_t t = 0; t < s.targets.size(); ++t) assign(s.targets[t], parts[t]);
}

// NOTE: namespaces are the only values that change after they are made. Python lets one hold
// anything, itself included; here a namespace may not hold a namespace or a function (whose
// closure holds the frames), so values stay acyclic: a namespace holding itself would print
// forever and never be freed. Chat templates keep counters, flags, strings and messages there.
void Evaluator::check_storable_in_namespace(const Value& v) {
  charge(1);
  if (v.is_namespace() || v.is_callable()) {
    fail("a namespace attribute cannot hold a namespace or a function");
  }
  if (v.is_list()) {
    for (const Value& item : v.list()) check_storable_in_namespace(item);
  } else if (v.is_dict()) {
    for (const auto& entry : v.dict()) check_storable_in_namespace(entry.second);
  }
}

Value Evaluator::make_macro(const Stmt& s) {
  const Stmt* stmt = &s;
  // NOTE: macros see the frames of their definition; the root frame is shared by reference
  // semantics only at the top level, which is where chat templates define them.
  return Value(Callable{s.name, [this, stmt](const CallArgs& a) {
                          std::vector<Frame> closure(frames_.begin(), frames_.begin() + 1);
                          return call_macro(*stmt, closure, a);
                        }});
}

Value Evaluator::call_macro(const Stmt& s, const std::vector<Frame>& closure,
                            const CallArgs& args) {
  charge(1);
  if (++call_depth_ > limits_.max_call_depth) {
    --call_depth_;
    fail("maximum recursion depth exceeded");
  }
  if (args.positional.size() > s.params.size()) {
    --call_depth_;
    fail("macro '" + s.name + "' takes not more than " + std::to_string(s.params.size()) +
         " argument(s)");
  }
  std::vector<Frame> saved = std::move(frames_);
  // The root frame stays live: later top-level sets are visible, as in jinja2.
  frames_ = closure;
  if (!frames_.empty() && !saved.empty()) frames_[0] = saved[0];
  Frame locals;
  for (size_t p = 0; p < s.params.size(); ++p) {
    const auto& [name, def] = s.params[p];
    if (p < args.positional.size()) {
      locals[name] = args.positional[p];
    } else if (const Value* kw = args.find(name)) {
      locals[name] = *kw;
    } else if (def) {
      frames_.push_back(locals);
      locals[name] = eval(*def);
      frames_.pop_back();
    } else {
      locals[name] = Value::undefined("'" + name + "' is undefined");
    }
  }
  for (const auto& [k, v] : args.keyword) {
    if (k == "caller") locals[k] = v;
  }
  frames_.push_back(std::move(locals));
  std::string result;
  try {
    result = capture(s.body);
  } catch (...) {
    frames_ = std::move(saved);
    --call_depth_;
    throw;
  }
  // Top-level assignments made inside the macro do not leak; restore the caller's frames.
  frames_ = std::move(saved);
  --call_depth_;
  return Value(std::move(result));
}

Value Evaluator::lookup(const std::string& name) const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end()) return found->second;
  }
  auto g = globals_.find(name);
  if (g != globals_.end()) return g->second;
  return Value::undefined("'" + name + "' is undefined");
}

void Evaluator::assign(const std::string& name, Value v) { frames_.back()[name] = std::move(v); }

CallArgs Evaluator::eval_args(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
  for (const auto& [k, x] : e.kwargs) args.keyword.emplace_back(k, eval(*x));
  return args;
}

Value Evaluator::apply_filter(const std::string& name, const Value& value, const CallArgs& args) {
  charge(1);
  return call_filter(*this, name, value, args);
}

bool Evaluator::apply_test(const std::string& name, const Value& value, const CallArgs& args) {
  return call_test(*this, name, value, args);
}

Value Evaluator::eval_filter_chain(const Expr& chain, const Value& input) {
  if (chain.kind != Expr::Kind::kFilter) return input;
  const Value inner = eval_filter_chain(*chain.args[0], input);
  return apply_filter(chain.name, inner, eval_args(chain, 1));
}

Value Evaluator::eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName:
      return lookup(e.name);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      List items;
      for (const auto& a : e.args) items.push_back(eval(*a));
      return Value(std::move(items));
    }
    case Expr::Kind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        const Value k = eval(*e.args[i]);
        Value v = eval(*e.args[i + 1]);
        const std::string key = dict_key(k);
        bool replaced = false;
        for (auto& [dk, dv] : d) {
          if (dk == key) {
            dv = v;
            replaced = true;
          }
        }
        if (!replaced) d.emplace_back(key, std::move(v));
      }
      return Value(std::move(d));
    }
    case Expr::Kind::kGetAttr: {
      const Value obj = eval(*e.args[0]);
      return get_attr(*this, obj, e.name);
    }
    case Expr::Kind::kGetItem: {
      const Value obj = eval(*e.args[0]);
      return get_item(*this, obj, eval(*e.args[1]));
    }
    case Expr::Kind::kSlice: {
      const Value obj = eval(*e.args[0]);
      Value parts[3];
      for (int i = 0; i < 3; ++i) parts[i] = e.args[i + 1] ? eval(*e.args[i + 1]) : Value::none();
      return slice_value(*this, obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall: {
      const Value callee = eval(*e.args[0]);
      const CallArgs args = eval_args(e, 1);
      if (callee.is_undefined()) undefined_error(callee);
      if (!callee.is_callable()) fail("'" + callee.type_name() + "' object is not callable");
      charge(1);
      return callee.callable().call(args);
    }
    case Expr::Kind::kFilter: {
      const Value v = eval(*e.args[0]);
      return apply_filter(e.name, v, eval_args(e, 1));
    }
    case Expr::Kind::kTest: {
      const Value v = eval(*e.args[0]);
      const bool r = apply_test(e.name, v, eval_args(e, 1));
      return Value(e.negated ? !r : r);
    }
    case Expr::Kind::kUnary: {
      const Value v = eval(*e.args[0]);
      if (e.name == "not") return Value(!v.truthy());
      if (v.is_undefined()) undefined_error(v);
      if (is_intlike(v)) {
        if (e.name == "-" && v.as_int() == INT64_MIN) integer_overflow();
        return Value(e.name == "-" ? -v.as_int() : v.as_int());
      }
      if (v.is_float()) return Value(e.name == "-" ? -v.as_double() : v.as_double());
      fail("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
    }
    case Expr::Kind::kBinary:
      return eval_binary(e);
    case Expr::Kind::kCompare:
      return eval_compare(e);
    case Expr::Kind::kCondition: {
      if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Value();
}

Value Evaluator::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  if (op == "and") {
    Value a = eval(*e.args[0]);
    return a.truthy() ? eval(*e.args[1]) : a;
  }
  if (op == "or") {
    Value a = eval(*e.args[0]);
    return a.truthy() ? a : eval(*e.args[1]);
  }
  const Value a = eval(*e.args[0]);
  const Value b = eval(*e.args[1]);
  const bool markup = a.is_markup() || b.is_markup();
  auto side = [markup](const Value& v) {
    return markup && !v.is_markup() ? html_escape(to_str(v)) : to_str(v);
  };
  if (op == "~") {  // str_join without autoescape: Markup does not escape here, unlike `+`
    std::string s = to_str(a) + to_str(b);
    check_size(s.size());
    return Value(std::move(s));
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const bool both_int = is_intlike(a) && is_intlike(b);
  const bool both_num = a.is_number() && b.is_number();
  int64_t int_result = 0;
  if (op == "+") {
    if (both_int) {
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &int_result)) integer_overflow();
      return Value(int_result);
    }
    if (both_num) return Value(a.as_double() + b.as_double());
    if (a.is_string()) {
      if (!b.is_string()) fail("can only concatenate str (not \"" + b.type_name() + "\") to str");
      check_size(a.str().size() + b.str().size());
      charge(static_cast<int64_t>((a.str().size() + b.str().size()) / 64));
      if (markup) return Value::markup(side(a) + side(b));
      return Value(a.str() + b.str());
    }
    if (a.is_list() && !a.is_generator()) {
      if (!b.is_list() || b.is_generator())
        fail("can only concatenate list (not \"" + b.type_name() + "\") to list");
      List out = a.list();
      out.insert(out.end(), b.list().begin(), b.list().end());
      charge(static_cast<int64_t>(out.size()));
      if (out.size() > limits_.max_sequence) fail("list is too long");
      return Value(std::move(out));
    }
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (both_int) {
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &int_result)) integer_overflow();
      return Value(int_result);
    }
    if (both_num) return Value(a.as_double() - b.as_double());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (both_int) {
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &int_result)) integer_overflow();
      return Value(int_result);
    }
    if (both_num) return Value(a.as_double() * b.as_double());
    const Value* seq =
        a.is_string() || a.is_list() ? &a : (b.is_string() || b.is_list() ? &b : nullptr);
    const Value* count = seq == &a ? &b : &a;
    if (seq && is_intlike(*count)) {
      const int64_t n = std::max<int64_t>(0, count->as_int());
      // The size checks divide: a product could wrap, and an empty sequence repeated 10^18
      // times must not spin through the repetitions.
      if (seq->is_string()) {
        const size_t len = seq->str().size();
        if (n == 0 || len == 0) return Value(std::string());
        if (static_cast<uint64_t>(n) > limits_.max_output_bytes / len) {
          fail("template output exceeded its size limit");
        }
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq->str();
        charge(static_cast<int64_t>(out.size() / 64));
        return Value(std::move(out));
      }
      const size_t len = seq->list().size();
      if (n == 0 || len == 0) return Value(List{});
      if (static_cast<uint64_t>(n) > limits_.max_sequence / len) fail("list is too long");
      List out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->list().begin(), seq->list().end());
      charge(static_cast<int64_t>(out.size()));
      return Value(std::move(out));
    }
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!both_num) unsupported("/", a, b);
    if (b.as_double() == 0) fail("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!both_num) unsupported("//", a, b);
    if (both_int) {
      if (b.as_int() == 0) fail("integer division or modulo by zero");
      return Value(floor_div(a.as_int(), b.as_int()));
    }
    if (b.as_double() == 0) fail("float floor division by zero");
    return Value(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) {
      CallArgs args;
      if (b.is_list()) {
        args.positional = b.list();
      } else {
        args.positional.push_back(b);
      }
      return apply_filter("format", a, args);
    }
    if (both_int) {
      if (b.as_int() == 0) fail("integer division or modulo by zero");
      return Value(floor_mod(a.as_int(), b.as_int()));
    }
    if (both_num) {
      if (b.as_double() == 0) fail("float modulo");
      const double r = std::fmod(a.as_double(), b.as_double());
      return Value((r != 0 && ((r < 0) != (b.as_double() < 0))) ? r + b.as_double() : r);
    }
    unsupported("%", a, b);
  }
  if (op == "**") {
    if (both_int && b.as_int() >= 0) return Value(int_pow(a.as_int(), b.as_int()));
    if (both_num) return Value(std::pow(a.as_double(), b.as_double()));
    unsupported("** or pow()", a, b);
  }
  fail("unknown operator " + op);
}

static bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) {
      fail("'in <string>' requires string as left operand, not " + item.type_name());
    }
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_dict() || container.is_namespace()) {
    return container.find(dict_key(item)) != nullptr;
  }
  if (container.is_list()) {
    for (const auto& x : container.list()) {
      if (values_equal(x, item)) return true;
    }
    return false;
  }
  if (container.is_undefined()) return false;
  fail("argument of type '" + container.type_name() + "' is not iterable");
}

Value Evaluator::eval_compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1]);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") {
      r = values_equal(left, right);
    } else if (op == "!=") {
      r = !values_equal(left, right);
    } else if (op == "in") {
      r = contains(right, left);
    } else if (op == "notin") {
      r = !contains(right, left);
    } else {
      if (left.is_undefined()) undefined_error(left);
      if (right.is_undefined()) undefined_error(right);
      const int c = compare_values(left, right, op.c_str());
      r = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

}  // namespace lm::jinja
