// Prints the regex XGrammar's JSON schema converter uses for each built-in string format, as one
// JSON object (format -> regex over the string's JSON text). Built and run by fuzz_formats.py
// against build/libxgrammar.a, so it reads the patched sources the server links.
#include <iostream>
#include <string>

#include "json_schema_converter.h"
#include "picojson.h"
#include "support/logging.h"

// JSONFormatToRegexPattern is protected: a subclass makes it callable.
struct FormatRegexes : xgrammar::JSONSchemaConverter {
  using xgrammar::JSONSchemaConverter::JSONFormatToRegexPattern;
};

// The library is built with XGRAMMAR_LOG_CUSTOMIZE: it needs a log sink.
namespace xgrammar {
[[noreturn]] void LogFatalImpl(const std::string& file, int lineno, const std::string& message) {
  throw LogFatalError(file, lineno, message);
}
void LogMessageImpl(const std::string&, int, int, const std::string& message) {
  std::cerr << message << "\n";
}
}  // namespace xgrammar

int main() {
  picojson::object out;
  // JSON Schema 2020-12's formats: those XGrammar has no rule for are left out.
  for (const char* format :
       {"date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname",
        "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template",
        "json-pointer", "relative-json-pointer", "regex"}) {
    if (auto regex = FormatRegexes::JSONFormatToRegexPattern(format)) {
      out[format] = picojson::value(*regex);
    }
  }
  std::cout << picojson::value(out).serialize() << "\n";
}
