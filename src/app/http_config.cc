#include "app/http_config.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "server/wire/api_error.h"

namespace lm {
namespace {

// Seconds (checked finite and >= 0 by check_launcher_args) to milliseconds; a positive value
// never rounds down to 0, which would mean no limit.
std::chrono::milliseconds millis(double secs) {
  if (secs <= 0) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(secs * 1000)));
}

}  // namespace

int64_t default_max_connections(uint64_t fd_limit) {
  return static_cast<int64_t>(
      std::clamp<uint64_t>(fd_limit / 2, 1, static_cast<uint64_t>(kMaxDefaultConnections)));
}

uint64_t raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(limit.rlim_cur);
}

HttpServerConfig http_server_config(const LauncherArgs& args, uint64_t fd_limit) {
  HttpServerConfig http;
  http.hostname = args.hostname;
  http.port = static_cast<int>(args.port);
  http.payload_limit = static_cast<uint64_t>(args.payload_limit);
  http.header_timeout = millis(args.http_header_timeout_secs);
  http.body_timeout = millis(args.http_body_timeout_secs);
  http.keepalive_timeout = millis(args.http_keepalive_timeout_secs);
  http.send_timeout = millis(args.http_send_timeout_secs);
  http.max_queued_bytes = static_cast<size_t>(args.http_max_send_buffer_bytes);
  http.socket_send_buffer_bytes = static_cast<int>(args.http_socket_send_buffer_bytes);
  http.max_connections = static_cast<size_t>(
      args.max_connections ? *args.max_connections : default_max_connections(fd_limit));
  const ApiError refusal = connection_limit_error();
  // Retry-After: the cap frees as soon as any connection closes.
  http.connection_limit_response = {refusal.status,
                                    {{"Content-Type", "application/json"}, {"Retry-After", "1"}},
                                    api_error_json(refusal)};
  return http;
}

}  // namespace lm
