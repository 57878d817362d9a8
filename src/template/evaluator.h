// Executes a parsed template against a set of global variables, with Python jinja2's scoping
// (for-loop bodies and macros get their own frames) and hard limits on work, depth and output.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "template/ast.h"
#include "template/value.h"

namespace lm::jinja {

struct RenderLimits {
  size_t max_output_bytes = 64u << 20;  // also caps any single string a template builds
  int64_t max_work = 2'000'000;         // statements, iterations (4 each), calls, copied elements
  int max_call_depth = 200;             // macro recursion
  size_t max_sequence = 1'000'000;      // elements in a list a template builds
};

class Evaluator {
 public:
  Evaluator(const std::unordered_map<std::string, Value>& globals, RenderLimits limits);
  std::string render(const Body& body);  // throws TemplateError

  // Used by filters and methods that build values.
  void charge(int64_t units);
  void check_size(size_t bytes) const;
  const RenderLimits& limits() const { return limits_; }
  Value apply_filter(const std::string& name, const Value& value, const CallArgs& args);
  bool apply_test(const std::string& name, const Value& value, const CallArgs& args);

 private:
  using Frame = std::unordered_map<std::string, Value>;
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  void exec_for(const Stmt& s, Flow& flow);
  void exec_set(const Stmt& s);
  void check_storable_in_namespace(const Value& v);
  Value make_macro(const Stmt& s);
  Value call_macro(const Stmt& s, const std::vector<Frame>& closure, const CallArgs& args);
  std::string capture(const Body& body);
  void emit(const std::string& text);

  Value eval(const Expr& e);
  Value eval_filter_chain(const Expr& chain, const Value& input);
  CallArgs eval_args(const Expr& e, size_t first);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);

  const std::unordered_map<std::string, Value>& globals_;
  RenderLimits limits_;
  std::vector<Frame> frames_;
  std::string* out_ = nullptr;
  size_t total_output_ = 0;
  int64_t work_ = 0;
  int call_depth_ = 0;
};

}  // namespace lm::jinja
