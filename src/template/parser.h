// Recursive-descent parser for jinja2's statement and expression grammar (the subset chat
// templates use, which is nearly all of it: no inheritance, includes or imports).
#pragma once

#include <string>

#include "template/ast.h"

namespace lm::jinja {

// Throws TemplateError with jinja2's wording for syntax errors.
Body parse_template(const std::string& source);

}  // namespace lm::jinja
