// JSON <-> template values: request JSON into values (key order kept), and Python json.dumps
// formatting for the tojson filter as transformers defines it.
#pragma once

#include <cstdint>
#include <string>

#include "template/value.h"

namespace lm::jinja {

struct DumpOptions {
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_indent = false;
  std::string indent;  // one level of indentation when has_indent
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  // Past this many bytes the dump stops with the evaluator's size-limit error (shared values can
  // make a small list print as gigabytes).
  size_t max_bytes = SIZE_MAX;
};

std::string dump_json(const Value& v, const DumpOptions& options);
// Throws TemplateError naming `what` when the text is not valid JSON.
Value parse_json_value(const std::string& text, const std::string& what);

}  // namespace lm::jinja
