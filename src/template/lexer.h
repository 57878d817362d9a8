// Splits template source into tokens the way jinja2's lexer does with trim_blocks and
// lstrip_blocks on: text runs (whitespace control applied), tag delimiters, expression tokens.
#pragma once

#include <string>
#include <vector>

namespace lm::jinja {

struct Token {
  enum class Kind {
    kText,
    kVarBegin,
    kVarEnd,
    kBlockBegin,
    kBlockEnd,
    kName,
    kString,
    kInt,
    kFloat,
    kOp,
    kEof
  };
  Kind kind;
  std::string text;  // text run, name, decoded string literal, number spelling, operator
  int line = 1;
};

// Throws TemplateError on unterminated tags, comments or strings.
std::vector<Token> tokenize(const std::string& source);

}  // namespace lm::jinja
