// Process-wide logging front end. Call sites format with fmt and pass a finished string, so the
// spdlog headers stay in log.cc. set_json_logs(true) switches to one JSON object per line (TGI's
// --json-output).
#pragma once

#include <string_view>

namespace lm {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

void set_log_level(LogLevel level);
void set_json_logs(bool json);
void log(LogLevel level, std::string_view message);

inline void log_debug(std::string_view m) { log(LogLevel::kDebug, m); }
inline void log_info(std::string_view m) { log(LogLevel::kInfo, m); }
inline void log_warn(std::string_view m) { log(LogLevel::kWarn, m); }
inline void log_error(std::string_view m) { log(LogLevel::kError, m); }

}  // namespace lm
