// Where XGrammar's log messages go. XGrammar is built with XGRAMMAR_LOG_CUSTOMIZE=1 and this
// library provides its two log functions (xgrammar_log_sink.cc). Its warnings name what it could
// not enforce (a keyword it ignores such as uniqueItems, a oneOf it reads as anyOf, a $ref it
// reads as "anything", a regex escape it matches literally): while a WarningCapture lives on a
// thread, that thread's warnings are collected instead of logged, so a compile can fail closed.
#pragma once

#include <string>
#include <vector>

namespace lm {

class XGrammarWarningCapture {
 public:
  XGrammarWarningCapture();
  ~XGrammarWarningCapture();
  XGrammarWarningCapture(const XGrammarWarningCapture&) = delete;
  XGrammarWarningCapture& operator=(const XGrammarWarningCapture&) = delete;

  // The warnings XGrammar logged on this thread since the capture began, in order.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  friend void capture_xgrammar_warning(const std::string& message);
  XGrammarWarningCapture* previous_;
  std::vector<std::string> warnings_;
};

}  // namespace lm
