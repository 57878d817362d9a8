// Mirrors jinja2/parser.py: the same precedence ladder (condexpr > or > and > not > compare >
// math1 > concat > math2 > pow > unary > primary/postfix/filters) and statement set.
#include "template/parser.h"

#include <cstdlib>
#include <set>

#include "template/lexer.h"

namespace lm::jinja {
namespace {

constexpr int kMaxNesting = 200;  // deeper statement or expression nesting is refused
// The deepest expression tree: nesting plus the links of left-associative chains (a.b.c,
// a + b + c, x | f | g), which the evaluator and the destructors walk recursively.
constexpr int kMaxTreeDepth = 1000;

using TK = Token::Kind;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_root() {
    Body body = parse_statements({});
    if (cur().kind != TK::kEof) fail("Encountered unknown tag '" + cur().text + "'.");
    return body;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser_(p) {
      ++parser_.tree_depth_;
      if (++parser_.depth_ > kMaxNesting) fail("template nesting is too deep");
    }
    ~DepthGuard() {
      --parser_.depth_;
      --parser_.tree_depth_;
    }
    Parser& parser_;
  };
  // One per loop that grows a chain: each link() deepens the tree by one level until it returns.
  struct ChainGuard {
    explicit ChainGuard(Parser& p) : parser_(p) {}
    ~ChainGuard() { parser_.tree_depth_ -= links_; }
    void link() {
      ++links_;
      if (++parser_.tree_depth_ > kMaxTreeDepth) fail("template expression is too deeply nested");
    }
    Parser& parser_;
    int links_ = 0;
  };

  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().kind == TK::kOp && cur().text == op; }
  bool is_name(const char* name) const { return cur().kind == TK::kName && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TK::kBlockEnd:
        return "end of statement block";
      case TK::kVarEnd:
        return "end of print statement";
      case TK::kEof:
        return "end of template";
      default:
        return t.text;
    }
  }
  [[noreturn]] void unexpected(const std::string& expected) const {
    fail("expected token '" + expected + "', got '" + describe(cur()) + "'");
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) unexpected(op);
  }
  void expect_block_end() {
    if (cur().kind != TK::kBlockEnd) unexpected("end of statement block");
    advance();
  }
  std::string expect_name() {
    if (cur().kind != TK::kName) unexpected("name");
    std::string n = cur().text;
    advance();
    return n;
  }

  // Parses until a {% tag %} whose keyword is in `ends`; stops with that keyword current.
  Body parse_statements(const std::set<std::string>& ends) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.kind == TK::kEof) {
        if (!ends.empty()) {
          fail("Unexpected end of template. Jinja was looking for the following tags: '" +
               join_ends(ends) + "'.");
        }
        return body;
      }
      if (t.kind == TK::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
      } else if (t.kind == TK::kVarBegin) {
        advance();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = t.line;
        s->expr = parse_tuple();
        if (cur().kind != TK::kVarEnd) unexpected("end of print statement");
        advance();
        body.push_back(std::move(s));
      } else if (t.kind == TK::kBlockBegin) {
        if (peek().kind == TK::kName && ends.count(peek().text)) {
          advance();
          return body;
        }
        advance();
        body.push_back(parse_statement());
      } else {
        fail("unexpected '" + t.text + "'");
      }
    }
  }

  static std::string join_ends(const std::set<std::string>& ends) {
    std::string out;
    for (const auto& e : ends) out += (out.empty() ? "" : "' or '") + e;
    return out;
  }

  // Consumes `{% endX [name] %}` after parse_statements stopped on it.
  void end_tag() {
    advance();
    if (cur().kind == TK::kName) advance();
    expect_block_end();
  }

  std::unique_ptr<Stmt> parse_statement() {
    if (cur().kind != TK::kName) fail("tag name expected");
    const std::string keyword = cur().text;
    const int line = cur().line;
    advance();
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (keyword == "if") {
      s->kind = Stmt::Kind::kIf;
      s->conditions.push_back(parse_tuple());
      expect_block_end();
      s->bodies.push_back(parse_statements({"elif", "else", "endif"}));
      while (true) {
        const std::string kw = cur().text;
        advance();
        if (kw == "elif") {
          s->conditions.push_back(parse_tuple());
          expect_block_end();
          s->bodies.push_back(parse_statements({"elif", "else", "endif"}));
        } else if (kw == "else") {
          expect_block_end();
          s->else_body = parse_statements({"endif"});
          s->has_else = true;
          end_tag_current();
          break;
        } else {
          expect_block_end();
          break;
        }
      }
    } else if (keyword == "for") {
      s->kind = Stmt::Kind::kFor;
      s->targets.push_back(expect_name());
      while (skip_op(",")) s->targets.push_back(expect_name());
      if (!skip_name("in")) unexpected("in");
      s->expr = parse_tuple(/*with_condexpr=*/false);
      if (skip_name("if")) s->filter = parse_expression();
      if (skip_name("recursive")) fail("recursive loops are not supported");
      expect_block_end();
      s->body = parse_statements({"endfor", "else"});
      if (cur().text == "else") {
        advance();
        expect_block_end();
        s->else_body = parse_statements({"endfor"});
        s->has_else = true;
      }
      end_tag();
    } else if (keyword == "set") {
      std::string target = expect_name();
      if (skip_op(".")) {
        s->name = expect_name();
      }
      s->targets.push_back(target);
      while (skip_op(",")) s->targets.push_back(expect_name());
      if (skip_op("=")) {
        s->kind = Stmt::Kind::kSet;
        s->expr = parse_tuple();
        expect_block_end();
      } else {
        s->kind = Stmt::Kind::kSetBlock;
        if (is_op("|")) s->filter = parse_filter_chain();
        expect_block_end();
        s->body = parse_statements({"endset"});
        end_tag();
      }
    } else if (keyword == "macro") {
      s->kind = Stmt::Kind::kMacro;
      s->name = expect_name();
      parse_params(s->params);
      expect_block_end();
      s->body = parse_statements({"endmacro"});
      end_tag();
    } else if (keyword == "call") {
      s->kind = Stmt::Kind::kCallBlock;
      if (is_op("(")) parse_params(s->params);
      s->expr = parse_expression();
      if (s->expr->kind != Expr::Kind::kCall) fail("expected call");
      expect_block_end();
      s->body = parse_statements({"endcall"});
      end_tag();
    } else if (keyword == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      s->filter = parse_filter_chain(/*leading_bar=*/false);
      expect_block_end();
      s->body = parse_statements({"endfilter"});
      end_tag();
    } else if (keyword == "break" || keyword == "continue") {
      s->kind = keyword == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      expect_block_end();
    } else if (keyword == "generation") {
      s->kind = Stmt::Kind::kScope;
      expect_block_end();
      s->body = parse_statements({"endgeneration"});
      end_tag();
    } else {
      fail("Encountered unknown tag '" + keyword + "'.");
    }
    return s;
  }

  void end_tag_current() {
    // parse_statements stopped with the end keyword current (already after {%).
    advance();
    expect_block_end();
  }

  void parse_params(std::vector<std::pair<std::string, ExprPtr>>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string name = expect_name();
      ExprPtr def;
      if (skip_op("=")) def = parse_expression();
      params.emplace_back(name, std::move(def));
    }
    expect_op(")");
  }

  // `| f(a) | g` (or `f(a) | g` for filter blocks) applied to a placeholder args[0].
  ExprPtr parse_filter_chain(bool leading_bar = true) {
    auto node = std::make_unique<Expr>();
    node->kind = Expr::Kind::kLiteral;
    bool first = true;
    ChainGuard chain(*this);
    while ((first && !leading_bar) || skip_op("|")) {
      first = false;
      chain.link();
      node = parse_filter(std::move(node));
    }
    return node;
  }

  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  ExprPtr parse_tuple(bool with_condexpr = true) {
    const int line = cur().line;
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::kTuple, line);
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().kind == TK::kBlockEnd || cur().kind == TK::kVarEnd || is_op(")") || is_name("in"))
        break;
      t->args.push_back(parse_expression(with_condexpr));
    }
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr = true) {
    DepthGuard guard(*this);
    ExprPtr expr = parse_or();
    if (!with_condexpr) return expr;
    ChainGuard chain(*this);
    while (skip_name("if")) {
      chain.link();
      auto c = make(Expr::Kind::kCondition, cur().line);
      ExprPtr cond = parse_or();
      ExprPtr otherwise;
      if (skip_name("else")) otherwise = parse_expression();
      c->args.push_back(std::move(expr));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(otherwise));
      expr = std::move(c);
    }
    return expr;
  }

  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Kind::kBinary, a->line);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    ChainGuard chain(*this);
    while (skip_name("or")) {
      chain.link();
      left = binary("or", std::move(left), parse_and());
    }
    return left;
  }
  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    ChainGuard chain(*this);
    while (skip_name("and")) {
      chain.link();
      left = binary("and", std::move(left), parse_not());
    }
    return left;
  }
  ExprPtr parse_not() {
    DepthGuard guard(*this);
    if (is_name("not")) {
      auto e = make(Expr::Kind::kUnary, cur().line);
      advance();
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr node;
    while (true) {
      std::string op;
      if (cur().kind == TK::kOp &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
           cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek().kind == TK::kName && peek().text == "in") {
        op = "notin";
        advance();
        advance();
      } else {
        break;
      }
      if (!node) {
        node = make(Expr::Kind::kCompare, first->line);
        node->args.push_back(std::move(first));
      }
      node->ops.push_back(op);
      node->args.push_back(parse_math1());
    }
    return node ? std::move(node) : std::move(first);
  }
  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    ChainGuard chain(*this);
    while (is_op("+") || is_op("-")) {
      chain.link();
      std::string op = cur().text;
      advance();
      left = binary(op, std::move(left), parse_concat());
    }
    return left;
  }
  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    ChainGuard chain(*this);
    while (skip_op("~")) {
      chain.link();
      left = binary("~", std::move(left), parse_math2());
    }
    return left;
  }
  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    ChainGuard chain(*this);
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.link();
      std::string op = cur().text;
      advance();
      left = binary(op, std::move(left), parse_pow());
    }
    return left;
  }
  ExprPtr parse_pow() {
    ExprPtr left = parse_unary();
    ChainGuard chain(*this);
    while (skip_op("**")) {
      chain.link();
      left = binary("**", std::move(left), parse_unary());
    }
    return left;
  }
  ExprPtr parse_unary(bool with_filter = true) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      node = make(Expr::Kind::kUnary, cur().line);
      node->name = cur().text;
      advance();
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    auto e = make(Expr::Kind::kLiteral, t.line);
    switch (t.kind) {
      case TK::kName:
        if (t.text == "true" || t.text == "True") {
          e->literal = Value(true);
        } else if (t.text == "false" || t.text == "False") {
          e->literal = Value(false);
        } else if (t.text == "none" || t.text == "None") {
          e->literal = Value::none();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
        }
        advance();
        return e;
      case TK::kString: {
        std::string s;
        while (cur().kind == TK::kString) {
          s += cur().text;
          advance();
        }
        e->literal = Value(std::move(s));
        return e;
      }
      case TK::kInt:
        e->literal = Value(static_cast<int64_t>(std::strtoll(t.text.c_str(), nullptr, 10)));
        advance();
        return e;
      case TK::kFloat:
        e->literal = Value(std::strtod(t.text.c_str(), nullptr));
        advance();
        return e;
      default:
        break;
    }
    if (skip_op("(")) {
      if (skip_op(")")) {
        e->kind = Expr::Kind::kTuple;
        return e;
      }
      ExprPtr inner = parse_tuple();
      expect_op(")");
      return inner;
    }
    if (skip_op("[")) {
      e->kind = Expr::Kind::kList;
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression());
      }
      expect_op("]");
      return e;
    }
    if (skip_op("{")) {
      e->kind = Expr::Kind::kDict;
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression());
        expect_op(":");
        e->args.push_back(parse_expression());
      }
      expect_op("}");
      return e;
    }
    fail("unexpected '" + describe(t) + "'");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    ChainGuard chain(*this);
    while (true) {
      chain.link();
      if (is_op(".")) {
        advance();
        auto e = make(Expr::Kind::kGetAttr, node->line);
        if (cur().kind == TK::kName) {
          e->name = cur().text;
        } else if (cur().kind == TK::kInt) {
          e->kind = Expr::Kind::kGetItem;
          auto idx = make(Expr::Kind::kLiteral, cur().line);
          idx->literal = Value(static_cast<int64_t>(std::strtoll(cur().text.c_str(), nullptr, 10)));
          e->args.push_back(std::move(node));
          e->args.push_back(std::move(idx));
          advance();
          node = std::move(e);
          continue;
        } else {
          unexpected("name");
        }
        advance();
        e->args.push_back(std::move(node));
        node = std::move(e);
      } else if (is_op("[")) {
        advance();
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target) {
    ExprPtr parts[3];
    bool is_slice = false;
    if (!is_op(":")) parts[0] = parse_expression();
    if (skip_op(":")) {
      is_slice = true;
      if (!is_op("]") && !is_op(":")) parts[1] = parse_expression();
      if (skip_op(":")) {
        if (!is_op("]")) parts[2] = parse_expression();
      }
    }
    expect_op("]");
    auto e = make(is_slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem, target->line);
    e->args.push_back(std::move(target));
    if (is_slice) {
      for (auto& p : parts) e->args.push_back(std::move(p));
    } else {
      e->args.push_back(std::move(parts[0]));
    }
    return e;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (cur().kind == TK::kName && peek().kind == TK::kOp && peek().text == "=") {
        std::string name = cur().text;
        advance();
        advance();
        e.kwargs.emplace_back(name, parse_expression());
      } else {
        e.args.push_back(parse_expression());
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(Expr::Kind::kCall, callee->line);
    e->args.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter(ExprPtr value) {
    auto e = make(Expr::Kind::kFilter, value->line);
    e->name = expect_name();
    while (is_op(".")) {
      advance();
      e->name += "." + expect_name();
    }
    e->args.push_back(std::move(value));
    if (is_op("(")) parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    ChainGuard chain(*this);
    while (true) {
      chain.link();
      if (skip_op("|")) {
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        advance();
        auto e = make(Expr::Kind::kTest, node->line);
        e->negated = skip_name("not");
        e->name = expect_name();
        e->args.push_back(std::move(node));
        if (is_op("(")) {
          parse_call_args(*e);
        } else if ((cur().kind == TK::kName || cur().kind == TK::kString ||
                    cur().kind == TK::kInt || cur().kind == TK::kFloat || is_op("[") ||
                    is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail("You cannot chain multiple tests with is");
          e->args.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(e);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;       // statement and expression nesting
  int tree_depth_ = 0;  // nesting plus the chain links being extended
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(tokenize(source)).parse_root(); }

}  // namespace lm::jinja
