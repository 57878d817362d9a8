// Tests of the transport's bounds on slow and stalled clients over real loopback sockets, with
// timeouts of a few hundred milliseconds: the head, body, keep-alive and send timeouts, the cap on
// queued response bytes, and the open-connection cap.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http_test_client.h"
#include "server/transport/http_server.h"

namespace lm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Every wait generous, so a test sets the one it exercises.
HttpServerConfig limits_config() {
  HttpServerConfig config;
  config.hostname = "127.0.0.1";
  config.port = 0;
  config.header_timeout = 30s;
  config.body_timeout = 30s;
  config.keepalive_timeout = 30s;
  config.send_timeout = 30s;
  return config;
}

HttpHandler ok_handler() {
  return [](HttpRequest request, std::shared_ptr<ResponseStream> response) {
    response->respond({200, {}, "ok " + request.body});
  };
}

constexpr std::string_view kHead =
    "POST /generate HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n";

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(HttpServerLimitsTest, PartialHeadGets408AfterTheHeaderTimeout) {
  HttpServerConfig config = limits_config();
  config.header_timeout = 300ms;
  HttpServer server(config, ok_handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  const auto start = Clock::now();
  client.send("POST /generate HTTP/1.1\r\nHost: a\r\nContent-Le");
  ParsedResponse response = client.read_response();
  EXPECT_EQ(response.status, 408);
  EXPECT_EQ(response.headers["connection"], "close");
  EXPECT_TRUE(client.at_eof());
  EXPECT_GE(seconds_since(start), 0.25);
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(HttpServerLimitsTest, HeaderTimeoutCountsFromTheStartNotTheLastByte) {
  HttpServerConfig config = limits_config();
  config.header_timeout = 400ms;
  HttpServer server(config, ok_handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  const auto start = Clock::now();
  // A slowloris client: a header byte every 50 ms never completes the head.
  std::promise<void> stop_sending;
  std::thread dripper([&client, stopped = stop_sending.get_future()] {
    std::string_view head = "GET / HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for (char c : head) {
      if (stopped.wait_for(50ms) == std::future_status::ready) return;
      if (::send(client.fd(), &c, 1, MSG_NOSIGNAL) != 1) return;
    }
  });
  ParsedResponse response = client.read_response();
  stop_sending.set_value();
  dripper.join();
  EXPECT_EQ(response.status, 408);
  EXPECT_LT(seconds_since(start), 1.5);
}

TEST(HttpServerLimitsTest, ConnectionThatSendsNothingIsClosedWithoutAResponse) {
  HttpServerConfig config = limits_config();
  config.header_timeout = 200ms;
  HttpServer server(config, ok_handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 1; }));
  const auto start = Clock::now();
  EXPECT_TRUE(client.at_eof());  // EOF with no bytes
  EXPECT_GE(seconds_since(start), 0.15);
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; }));
}

TEST(HttpServerLimitsTest, StalledBodyGets408ButATricklingOneIsServed) {
  HttpServerConfig config = limits_config();
  config.body_timeout = 300ms;
  HttpServer server(config, ok_handler());
  ASSERT_TRUE(server.start().ok());
  {  // Half the body, then nothing.
    Client client(server.port());
    client.send(std::string(kHead) + "ab");
    ParsedResponse response = client.read_response();
    EXPECT_EQ(response.status, 408);
    EXPECT_TRUE(client.at_eof());
  }
  {  // The timeout is between reads: a byte every 150 ms for 600 ms in all is fine.
    Client client(server.port());
    client.send(kHead);
    for (char c : std::string("wxyz")) {
      std::this_thread::sleep_for(150ms);
      client.send(std::string(1, c));
    }
    ParsedResponse response = client.read_response();
    EXPECT_EQ(response.status, 200);
    EXPECT_EQ(response.body, "ok wxyz");
  }
}

TEST(HttpServerLimitsTest, IdleKeepAliveConnectionIsClosedAfterItsTimeout) {
  HttpServerConfig config = limits_config();
  config.keepalive_timeout = 300ms;
  config.header_timeout = 5s;  // the idle wait, not the head's, must close it
  HttpServer server(config, ok_handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send(std::string(kHead) + "1234");
  EXPECT_EQ(client.read_response().body, "ok 1234");
  // A second request within the idle time is served on the same connection.
  std::this_thread::sleep_for(100ms);
  client.send(std::string(kHead) + "5678");
  ParsedResponse second = client.read_response();
  EXPECT_EQ(second.body, "ok 5678");
  EXPECT_EQ(second.headers["connection"], "keep-alive");
  const auto idle_since = Clock::now();
  EXPECT_TRUE(client.at_eof());  // closed silently
  EXPECT_GE(seconds_since(idle_since), 0.25);
  EXPECT_LT(seconds_since(idle_since), 2.0);
}

TEST(HttpServerLimitsTest, ZeroTimeoutsWaitForever) {
  HttpServerConfig config = limits_config();
  config.header_timeout = 0ms;
  config.body_timeout = 0ms;
  config.keepalive_timeout = 0ms;
  HttpServer server(config, ok_handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send("POST /generate HTTP/1.1\r\n");
  std::this_thread::sleep_for(300ms);
  client.send("Host: a\r\nContent-Length: 4\r\n\r\nab");
  std::this_thread::sleep_for(300ms);
  client.send("cd");
  EXPECT_EQ(client.read_response().body, "ok abcd");
  std::this_thread::sleep_for(300ms);
  client.send(std::string(kHead) + "efgh");
  EXPECT_EQ(client.read_response().body, "ok efgh");
}

// A client that never reads a response larger than every socket buffer: its write stops making
// progress, the connection is closed after send_timeout and the stream reports the close.
TEST(HttpServerLimitsTest, StalledReaderIsClosedAfterTheSendTimeout) {
  HttpServerConfig config = limits_config();
  config.send_timeout = 300ms;
  config.max_queued_bytes = size_t{64} << 20;  // the timeout, not the queue cap, must act
  PendingRequests pending;
  HttpServer server(config, pending.handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port(), /*receive_buffer=*/4096);
  client.send(std::string(kHead) + "1234");
  auto entry = pending.wait(0);
  ASSERT_TRUE(entry.response);
  std::promise<void> closed;
  entry.response->on_close([&] { closed.set_value(); });
  entry.response->start_stream(200, {{"Content-Type", "text/event-stream"}});
  const auto start = Clock::now();
  // 16 MiB: more than the kernel's send (tcp_wmem max 4 MiB) and receive buffers hold.
  for (int i = 0; i < 256 && !entry.response->closed(); ++i) {
    entry.response->write(std::string(size_t{64} << 10, 'x'));
  }
  ASSERT_EQ(closed.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_GE(seconds_since(start), 0.25);
  EXPECT_TRUE(entry.response->closed());
  EXPECT_TRUE(eventually([&] { return server.in_flight() == 0; }));
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; }));
}

// With a small SO_SNDBUF the kernel holds little for a stalled client, so a response of 1 MiB
// (which the default autotuned buffers would absorb whole) already stalls.
TEST(HttpServerLimitsTest, SocketSendBufferBoundsWhatTheKernelHolds) {
  HttpServerConfig config = limits_config();
  config.send_timeout = 300ms;
  config.max_queued_bytes = size_t{64} << 20;
  config.socket_send_buffer_bytes = 16384;
  PendingRequests pending;
  HttpServer server(config, pending.handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port(), /*receive_buffer=*/4096);
  client.send(std::string(kHead) + "1234");
  auto entry = pending.wait(0);
  ASSERT_TRUE(entry.response);
  std::promise<void> closed;
  entry.response->on_close([&] { closed.set_value(); });
  entry.response->start_stream(200, {});
  for (int i = 0; i < 16; ++i) entry.response->write(std::string(size_t{64} << 10, 'x'));
  ASSERT_EQ(closed.get_future().wait_for(5s), std::future_status::ready);
}

// A slow reader that keeps taking bytes is not stalled: the whole response takes several send
// timeouts to arrive, but every partial write counts as progress.
TEST(HttpServerLimitsTest, SlowButSteadyReaderGetsTheWholeResponse) {
  HttpServerConfig config = limits_config();
  config.send_timeout = 300ms;
  constexpr size_t kBodyBytes = size_t{3} << 20;
  HttpServer server(config, [](HttpRequest, std::shared_ptr<ResponseStream> response) {
    response->respond({200, {}, std::string(kBodyBytes, 'y')});
  });
  ASSERT_TRUE(server.start().ok());
  Client client(server.port(), /*receive_buffer=*/65536);
  client.send(std::string(kHead) + "1234");
  const auto start = Clock::now();
  ParsedResponse head = client.read_head();
  ASSERT_EQ(head.status, 200);
  size_t received = 0;
  while (received < kBodyBytes) {
    size_t n = client.discard_some(65536);
    ASSERT_GT(n, 0u) << "closed after " << received << " bytes";
    received += n;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(received, kBodyBytes);
  EXPECT_GT(seconds_since(start), 0.3);  // longer than one send timeout in all
}

TEST(HttpServerLimitsTest, ClientFallingBehindTheQueueCapIsClosed) {
  HttpServerConfig config = limits_config();
  config.send_timeout = 0ms;  // no timeout: only the cap can act
  config.max_queued_bytes = 256 << 10;
  PendingRequests pending;
  HttpServer server(config, pending.handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port(), /*receive_buffer=*/4096);
  client.send(std::string(kHead) + "1234");
  auto entry = pending.wait(0);
  ASSERT_TRUE(entry.response);
  std::promise<void> closed;
  entry.response->on_close([&] { closed.set_value(); });
  entry.response->start_stream(200, {});
  // Events written one at a time as the engine would: the queue grows while the socket is full.
  for (int i = 0; i < 4096 && !entry.response->closed(); ++i) {
    entry.response->write(std::string(8192, 'z'));
    std::this_thread::sleep_for(200us);
  }
  ASSERT_EQ(closed.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(eventually([&] { return server.in_flight() == 0; }));
}

TEST(HttpServerLimitsTest, ConnectionsPastTheCapAreAnsweredAndOpenOnesServedOn) {
  HttpServerConfig config = limits_config();
  config.max_connections = 2;
  config.connection_limit_response = {
      503, {{"Content-Type", "application/json"}}, R"({"error":"full","error_type":"overloaded"})"};
  HttpServer server(config, ok_handler());
  ASSERT_TRUE(server.start().ok());
  auto first = std::make_unique<Client>(server.port());
  Client second(server.port());
  ASSERT_TRUE(eventually([&] { return server.open_connections() == 2; }));

  {  // Past the cap: the configured answer, then the close.
    Client third(server.port());
    third.send(std::string(kHead) + "1234");
    ParsedResponse refused = third.read_response();
    EXPECT_EQ(refused.status, 503);
    EXPECT_EQ(refused.headers["content-type"], "application/json");
    EXPECT_EQ(refused.headers["connection"], "close");
    EXPECT_EQ(refused.body, R"({"error":"full","error_type":"overloaded"})");
    EXPECT_TRUE(third.at_eof());
  }
  EXPECT_EQ(server.open_connections(), 2);

  // The open connections are still served, with keep-alive.
  second.send(std::string(kHead) + "5678");
  EXPECT_EQ(second.read_response().body, "ok 5678");
  first->send(std::string(kHead) + "abcd");
  EXPECT_EQ(first->read_response().body, "ok abcd");

  // A slot freed by a close is taken by the next connection.
  first.reset();
  ASSERT_TRUE(eventually([&] { return server.open_connections() == 1; }));
  Client fourth(server.port());
  fourth.send(std::string(kHead) + "efgh");
  ParsedResponse served = fourth.read_response();
  EXPECT_EQ(served.status, 200);
  EXPECT_EQ(served.body, "ok efgh");
}

}  // namespace
}  // namespace lm
