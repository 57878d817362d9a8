// The HTTP server's settings from the launcher's flags: the connection flags and their
// environment twins, their defaults (nginx's timeouts, a cap from the descriptor limit), their
// checks, and the 503 a connection past the cap is answered.
#include "app/http_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>

#include "../app/launcher_test_helpers.h"
#include "app/launcher_flags.h"

namespace lm {
namespace {

using testing_app::check_error;
using testing_app::parse;

using namespace std::chrono_literals;

TEST(HttpConfig, DefaultsAreNginxTimeoutsAndACapFromTheDescriptorLimit) {
  LauncherArgs args;
  ASSERT_EQ(parse({}, args), "");
  EXPECT_FALSE(args.max_connections.has_value());
  HttpServerConfig http = http_server_config(args, /*fd_limit=*/1024);
  EXPECT_EQ(http.header_timeout, 60s);
  EXPECT_EQ(http.body_timeout, 60s);
  EXPECT_EQ(http.keepalive_timeout, 75s);
  EXPECT_EQ(http.send_timeout, 60s);
  EXPECT_EQ(http.max_queued_bytes, size_t{4} << 20);
  EXPECT_EQ(http.socket_send_buffer_bytes, 0);  // the kernel's autotuning
  EXPECT_EQ(http.max_connections, 512u);
  EXPECT_EQ(http.payload_limit, 2000000u);
  EXPECT_EQ(http.port, 3000);
}

TEST(HttpConfig, DefaultCapIsHalfTheDescriptorLimitUpTo10000) {
  EXPECT_EQ(default_max_connections(1024), 512);
  EXPECT_EQ(default_max_connections(20000), 10000);
  EXPECT_EQ(default_max_connections(1048576), 10000);
  EXPECT_EQ(default_max_connections(1), 1);
}

TEST(HttpConfig, FlagsAndEnvironmentSetEveryLimit) {
  setenv("HTTP_KEEPALIVE_TIMEOUT_SECS", "5", 1);
  setenv("MAX_CONNECTIONS", "300", 1);
  LauncherArgs args;
  ASSERT_EQ(parse({"--http-header-timeout-secs", "0.5", "--http-body-timeout-secs", "2",
                   "--http-send-timeout-secs", "0", "--http-max-send-buffer-bytes", "65536",
                   "--http-socket-send-buffer-bytes", "16384", "--max-connections", "100"},
                  args),
            "");
  unsetenv("HTTP_KEEPALIVE_TIMEOUT_SECS");
  unsetenv("MAX_CONNECTIONS");
  args.device = "cpu";  // the flags' "auto" is resolved before the checks
  EXPECT_EQ(check_error(args), "");
  HttpServerConfig http = http_server_config(args, 1024);
  EXPECT_EQ(http.header_timeout, 500ms);
  EXPECT_EQ(http.body_timeout, 2s);
  EXPECT_EQ(http.keepalive_timeout, 5s);  // from the environment
  EXPECT_EQ(http.send_timeout, 0ms);      // 0: no limit
  EXPECT_EQ(http.max_queued_bytes, 65536u);
  EXPECT_EQ(http.socket_send_buffer_bytes, 16384);
  EXPECT_EQ(http.max_connections, 100u);  // the flag wins over MAX_CONNECTIONS

  LauncherArgs no_cap;
  ASSERT_EQ(parse({"--max-connections", "0"}, no_cap), "");
  EXPECT_EQ(http_server_config(no_cap, 1024).max_connections, 0u);

  LauncherArgs tiny;  // a positive timeout never rounds down to "no limit"
  ASSERT_EQ(parse({"--http-header-timeout-secs", "0.0001"}, tiny), "");
  EXPECT_EQ(http_server_config(tiny, 1024).header_timeout, 1ms);
}

TEST(HttpConfig, ChecksRefuseNegativeOrHugeValues) {
  LauncherArgs a;
  a.http_header_timeout_secs = -1;
  EXPECT_EQ(check_error(a),
            "Invalid argument: `http_header_timeout_secs` must be in 0..86400 (0: no timeout)");
  a = {};
  a.http_send_timeout_secs = 1e9;
  EXPECT_EQ(check_error(a),
            "Invalid argument: `http_send_timeout_secs` must be in 0..86400 (0: no timeout)");
  a = {};
  a.http_max_send_buffer_bytes = 0;
  EXPECT_EQ(check_error(a), "Invalid argument: `http_max_send_buffer_bytes` must be > 0");
  a = {};
  a.http_socket_send_buffer_bytes = -1;
  EXPECT_EQ(check_error(a),
            "Invalid argument: `http_socket_send_buffer_bytes` must be in 0..1073741824 (0: the "
            "kernel's)");
  a = {};
  a.max_connections = -1;
  EXPECT_EQ(check_error(a), "Invalid argument: `max_connections` must be >= 0 (0: no cap)");
}

TEST(HttpConfig, ConnectionsPastTheCapGetA503InTgiErrorShape) {
  HttpServerConfig http = http_server_config(LauncherArgs{}, 1024);
  const HttpResponse& refusal = http.connection_limit_response;
  EXPECT_EQ(refusal.status, 503);
  EXPECT_EQ(refusal.body, R"({"error":"Too many open connections","error_type":"overloaded"})");
  ASSERT_EQ(refusal.headers.size(), 2u);
  EXPECT_EQ(refusal.headers[0],
            (std::pair<std::string, std::string>{"Content-Type", "application/json"}));
  EXPECT_EQ(refusal.headers[1], (std::pair<std::string, std::string>{"Retry-After", "1"}));
}

}  // namespace
}  // namespace lm
