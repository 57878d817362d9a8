#include "app/log_level.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace lm {
namespace {

std::optional<LogLevel> level_word(std::string word) {
  std::transform(word.begin(), word.end(), word.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (word == "trace" || word == "debug") return LogLevel::kDebug;
  if (word == "info") return LogLevel::kInfo;
  if (word == "warn" || word == "warning") return LogLevel::kWarn;
  if (word == "error" || word == "off") return LogLevel::kError;
  return std::nullopt;
}

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view value) {
  std::optional<LogLevel> most_verbose;
  size_t begin = 0;
  while (begin <= value.size()) {
    size_t end = value.find(',', begin);
    if (end == std::string_view::npos) end = value.size();
    std::string_view directive = value.substr(begin, end - begin);
    // "target=level", "target[span]=level" or a bare "level".
    if (const size_t eq = directive.rfind('='); eq != std::string_view::npos)
      directive = directive.substr(eq + 1);
    while (!directive.empty() && std::isspace(static_cast<unsigned char>(directive.front())))
      directive.remove_prefix(1);
    while (!directive.empty() && std::isspace(static_cast<unsigned char>(directive.back())))
      directive.remove_suffix(1);
    if (auto level = level_word(std::string(directive))) {
      if (!most_verbose || *level < *most_verbose) most_verbose = level;
    }
    begin = end + 1;
  }
  return most_verbose;
}

}  // namespace lm
