// jinja2's filters and tests, transformers' globals (raise_exception, strftime_now, namespace,
// range, dict), Python methods on str/list/dict values, and attribute/item access rules.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <unordered_map>

#include "template/value.h"

namespace lm::jinja {

class Evaluator;

Value call_filter(Evaluator& ev, const std::string& name, const Value& value, const CallArgs& args);
bool call_test(Evaluator& ev, const std::string& name, const Value& value, const CallArgs& args);
// obj.name and obj[key] as jinja2's sandboxed environment resolves them (methods included).
Value get_attr(Evaluator& ev, const Value& obj, const std::string& name);
Value get_item(Evaluator& ev, const Value& obj, const Value& key);
Value slice_value(Evaluator& ev, const Value& obj, const Value& start, const Value& stop,
                  const Value& step);
void add_globals(std::unordered_map<std::string, Value>& globals);
// Raises the UndefinedError jinja2 would raise for using this undefined value.
[[noreturn]] void undefined_error(const Value& undefined);
// Elements of an iterable value (string chars, dict keys); TypeError for others.
List iterate(const Value& v);
// Python len() in code points for strings.
int64_t py_len(const Value& v);

// Pins strftime_now's clock (tests); nullopt restores the real local time.
void set_strftime_now_for_testing(std::optional<std::time_t> fixed);

}  // namespace lm::jinja
