#include "base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

#include "base/json_string.h"

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

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kError:
      return "ERROR";
  }
  return "INFO";
}

}  // namespace

void set_log_level(LogLevel level) { logger().set_level(to_spdlog(level)); }

void set_json_logs(bool json) {
  g_json = json;
  // TGI's launcher format (tracing-subscriber JSON, not flattened), one object per line on stdout:
  // {"timestamp":"...Z","level":"INFO","fields":{"message":"..."},"target":"text_generation_launcher"}
  if (json) logger().set_pattern("%v", spdlog::pattern_time_type::utc);
}

void log(LogLevel level, std::string_view message) {
  if (g_json) {
    if (!logger().should_log(to_spdlog(level))) return;
    const auto now = std::chrono::system_clock::now();
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(micros / 1000000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char stamp[80];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(micros % 1000000));
    std::string line = "{\"timestamp\":\"";
    line += stamp;
    line += "\",\"level\":\"";
    line += level_name(level);
    line += "\",\"fields\":{\"message\":";
    append_json_string(line, message);
    line += "},\"target\":\"text_generation_launcher\"}\n";
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  } else {
    logger().log(to_spdlog(level), "{}", message);
  }
}

}  // namespace lm
