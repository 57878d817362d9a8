// The JSON Schema keywords XGrammar 0.2.8 accepts and then ignores without a word (its
// SchemaParser::WarnUnsupportedKeywords lists them and warns only in a verbose mode its API does
// not expose), and the standard formats it has no rule for (a free string): a schema using one
// is refused, since its outputs would not honour it. Constraints XGrammar drops with a warning
// are caught by XGrammarWarningCapture instead.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lm {

// The first such keyword in a schema position of `schema_json` (a property *named* like one is
// not a keyword), as "`uniqueItems` at /properties/tags" or "`format: regex` at /properties/p";
// nullopt when there is none or the text is not JSON (XGrammar reports that).
std::optional<std::string> find_unenforced_keyword(std::string_view schema_json);

}  // namespace lm
