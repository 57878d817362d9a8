// The parsed template: expression and statement nodes, owned by unique_ptr trees.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace lm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kList,      // args
    kTuple,     // args
    kDict,      // args: key, value, key, value...
    kGetAttr,   // args[0].name
    kGetItem,   // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]] (null parts allowed)
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs)
    kTest,      // args[0] is [not] name(args[1..], kwargs); negated
    kUnary,     // name in {"-", "+", "not"}
    kBinary,    // args[0] name args[1]; name in + - * / // % ** ~ and or
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ...
    kCondition  // args[0] if args[1] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0;
  std::string name;
  Value literal;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,       // text
    kOutput,     // {{ expr }}
    kIf,         // conditions[i] -> bodies[i]; else_body
    kFor,        // for targets in expr [if filter] body else else_body
    kSet,        // targets = expr  (or attr: targets[0].attr = expr)
    kSetBlock,   // {% set targets[0] %}body{% endset %}, filters applied
    kMacro,      // name(params with defaults) body
    kCallBlock,  // {% call(params) expr %}body
    kFilterBlock,
    kBreak,
    kContinue,
    kScope  // body rendered in place (generation blocks)
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;  // macro name, or the attribute of a namespace assignment
  ExprPtr expr;
  ExprPtr
      filter;  // for-loop condition; filter chain of set/filter blocks (args[0] is a placeholder)
  std::vector<std::string> targets;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro / caller params with defaults
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  bool has_else = false;
};

}  // namespace lm::jinja
