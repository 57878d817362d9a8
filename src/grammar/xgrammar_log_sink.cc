#include "grammar/xgrammar_log_sink.h"

#include <string>

#include "base/log.h"
#include "support/logging.h"  // XGrammar's (SYSTEM, PRIVATE include): its LogFatalError

namespace lm {
namespace {

thread_local XGrammarWarningCapture* current_capture = nullptr;

}  // namespace

XGrammarWarningCapture::XGrammarWarningCapture() : previous_(current_capture) {
  current_capture = this;
}

XGrammarWarningCapture::~XGrammarWarningCapture() { current_capture = previous_; }

void capture_xgrammar_warning(const std::string& message) {
  current_capture->warnings_.push_back(message);
}

}  // namespace lm

namespace xgrammar {

// XGRAMMAR_LOG(FATAL), XGRAMMAR_CHECK: the error XGrammar itself throws (its JSON parser catches
// this type), without the "[time] file:line:" prefix, which means nothing to a client.
[[noreturn]] void LogFatalImpl(const std::string& file, int lineno, const std::string& message) {
  throw LogFatalError(file, lineno, message);
}

void LogMessageImpl(const std::string& file, int lineno, int level, const std::string& message) {
  if (level == XGRAMMAR_LOG_LEVEL_WARNING && lm::current_capture != nullptr) {
    lm::capture_xgrammar_warning(message);
    return;
  }
  const std::string text =
      "XGrammar: " + message + " (" + file + ":" + std::to_string(lineno) + ")";
  if (level >= XGRAMMAR_LOG_LEVEL_WARNING) {
    lm::log_warn(text);
  } else {
    lm::log_debug(text);
  }
}

}  // namespace xgrammar
