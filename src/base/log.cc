#include "base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace lm {
namespace {

std::atomic<bool> g_json{false};

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto l = spdlog::stderr_color_mt("lm");
    l->set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %^%l%$ %v", spdlog::pattern_time_type::utc);
    return l;
  }();
  return *instance;
}

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

void set_log_level(LogLevel level) { logger().set_level(to_spdlog(level)); }

void set_json_logs(bool json) {
  g_json = json;
  if (json)
    logger().set_pattern(R"({"timestamp":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%^%L%$",%v})",
                         spdlog::pattern_time_type::utc);
}

void log(LogLevel level, std::string_view message) {
  if (g_json) {
    logger().log(to_spdlog(level), "\"fields\":{{\"message\":\"{}\"}},\"target\":\"lm\"",
                 json_escape(message));
  } else {
    logger().log(to_spdlog(level), "{}", message);
  }
}

}  // namespace lm
