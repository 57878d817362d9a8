// Tests of the HTTP transport over real loopback sockets: framing, limits, keep-alive, streaming
// from another thread, disconnect detection, draining, and many connections on two I/O threads.
#include "server/transport/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "http_test_client.h"

namespace lm {
namespace {

using namespace std::chrono_literals;

// Answers every request at once: echoes method, target and body.
HttpHandler echo_handler() {
  return [](HttpRequest request, std::shared_ptr<ResponseStream> response) {
    HttpResponse out;
    out.headers = {{"Content-Type", "text/plain"},
                   {"X-Method", request.method},
                   {"X-Path", request.path},
                   {"X-Test", request.header("x-test")}};
    out.body = request.method + " " + request.target + " " + request.body;
    response->respond(std::move(out));
  };
}

HttpServerConfig test_config() {
  HttpServerConfig config;
  config.hostname = "127.0.0.1";
  config.port = 0;
  config.num_io_threads = 2;
  return config;
}

TEST(HttpServerTest, GetWithKeepAliveServesTwoRequestsOnOneConnection) {
  HttpServer server(test_config(), echo_handler());
  ASSERT_TRUE(server.start().ok());
  ASSERT_GT(server.port(), 0);
  Client client(server.port());
  ASSERT_TRUE(client.connected());

  client.send("GET /info?x=1 HTTP/1.1\r\nHost: a\r\nX-Test: one\r\nx-test: two\r\n\r\n");
  ParsedResponse first = client.read_response();
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "GET /info?x=1 ");
  EXPECT_EQ(first.headers["x-path"], "/info");
  EXPECT_EQ(first.headers["x-test"], "one, two");  // repeated headers joined, names lower-cased
  EXPECT_EQ(first.headers["connection"], "keep-alive");
  EXPECT_EQ(first.headers["content-length"], "14");
  EXPECT_EQ(first.headers["content-type"], "text/plain");
  EXPECT_TRUE(first.headers.count("date"));

  client.send("GET /health HTTP/1.1\r\nHost: a\r\n\r\n");
  ParsedResponse second = client.read_response();
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(second.body, "GET /health ");
  EXPECT_TRUE(eventually([&] { return server.in_flight() == 0; }));
}

TEST(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  HttpServer server(test_config(), echo_handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send("GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(client.read_response().body, "GET /a ");
  EXPECT_EQ(client.read_response().body, "GET /b ");
}

TEST(HttpServerTest, RequestSentWhileAnotherIsPendingWaitsItsTurn) {
  PendingRequests pending;
  HttpServer server(test_config(), pending.handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send("GET /1 HTTP/1.1\r\nHost: a\r\n\r\n");
  auto first = pending.wait(0);
  ASSERT_TRUE(first.response);
  client.send("GET /2 HTTP/1.1\r\nHost: a\r\n\r\n");  // read ahead by the disconnect watch
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(pending.size(), 1u);  // not dispatched before the first response is done
  first.response->respond({200, {}, "one"});
  EXPECT_EQ(client.read_response().body, "one");
  auto second = pending.wait(1);
  ASSERT_TRUE(second.response);
  EXPECT_EQ(second.request.path, "/2");
  client.send("GET /3 HTTP/1.1\r\nHost: a\r\n\r\n");
  second.response->respond({200, {}, "two"});
  EXPECT_EQ(client.read_response().body, "two");
  auto third = pending.wait(2);
  ASSERT_TRUE(third.response);
  EXPECT_EQ(third.request.path, "/3");
  third.response->respond({200, {}, "three"});
  EXPECT_EQ(client.read_response().body, "three");
}

TEST(HttpServerTest, PostBodyIsEchoed) {
  HttpServer server(test_config(), echo_handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  std::string body = R"({"inputs":"hello"})";
  client.send(
      "POST /generate HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body);
  ParsedResponse response = client.read_response();
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "POST /generate " + body);

  // A chunked request body is reassembled.
  client.send(
      "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  EXPECT_EQ(client.read_response().body, "POST /c abcde");
}

TEST(HttpServerTest, ExpectContinueGetsInterimResponse) {
  HttpServer server(test_config(), echo_handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send("POST /e HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  EXPECT_EQ(client.read_until("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  client.send("body");
  EXPECT_EQ(client.read_response().body, "POST /e body");
}

TEST(HttpServerTest, BodyOverPayloadLimitGets413WithTgiText) {
  HttpServerConfig config = test_config();
  config.payload_limit = 100;
  std::atomic<int> calls{0};
  HttpServer server(config, [&](HttpRequest, std::shared_ptr<ResponseStream> response) {
    ++calls;
    response->respond({});
  });
  ASSERT_TRUE(server.start().ok());

  {  // Announced by Content-Length: rejected from the header alone.
    Client client(server.port());
    client.send("POST /generate HTTP/1.1\r\nHost: a\r\nContent-Length: 200\r\n\r\n" +
                std::string(200, 'x'));
    ParsedResponse response = client.read_response();
    EXPECT_EQ(response.status, 413);
    EXPECT_EQ(response.body, "Failed to buffer the request body: length limit exceeded");
    EXPECT_EQ(response.headers["content-type"], "text/plain; charset=utf-8");
    EXPECT_EQ(response.headers["connection"], "close");
    EXPECT_TRUE(client.at_eof());
  }
  {  // Chunked: rejected once the running total passes the limit.
    Client client(server.port());
    client.send(
        "POST /generate HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        "64\r\n" +
        std::string(100, 'x') + "\r\n1\r\nx\r\n0\r\n\r\n");
    ParsedResponse response = client.read_response();
    EXPECT_EQ(response.status, 413);
    EXPECT_EQ(response.body, "Failed to buffer the request body: length limit exceeded");
  }
  {  // Exactly at the limit is fine.
    Client client(server.port());
    client.send("POST /generate HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n" +
                std::string(100, 'x'));
    EXPECT_EQ(client.read_response().status, 200);
  }
  EXPECT_EQ(calls.load(), 1);
}

TEST(HttpServerTest, OversizedHeaderGets431) {
  HttpServerConfig config = test_config();
  config.max_header_bytes = 1024;
  HttpServer server(config, echo_handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send("GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(2000, 'y') + "\r\n\r\n");
  ParsedResponse response = client.read_response();
  EXPECT_EQ(response.status, 431);
  EXPECT_EQ(response.headers["connection"], "close");
  EXPECT_TRUE(client.at_eof());
}

TEST(HttpServerTest, MalformedRequestGets400AndClose) {
  std::atomic<int> calls{0};
  HttpServer server(test_config(), [&](HttpRequest, std::shared_ptr<ResponseStream> response) {
    ++calls;
    response->respond({});
  });
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send("THIS IS NOT HTTP\r\n\r\n");
  ParsedResponse response = client.read_response();
  EXPECT_EQ(response.status, 400);
  EXPECT_TRUE(client.at_eof());
  EXPECT_EQ(calls.load(), 0);
}

TEST(HttpServerTest, HeadAndOptionsReachTheHandler) {
  HttpServer server(test_config(), echo_handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send("OPTIONS /generate HTTP/1.1\r\nHost: a\r\n\r\n");
  ParsedResponse options = client.read_response();
  EXPECT_EQ(options.headers["x-method"], "OPTIONS");
  EXPECT_EQ(options.body, "OPTIONS /generate ");

  // HEAD: the length of the body that GET would send, and no body bytes.
  client.send("HEAD /x HTTP/1.1\r\nHost: a\r\n\r\nGET /y HTTP/1.1\r\nHost: a\r\n\r\n");
  ParsedResponse head = client.read_response(/*has_body=*/false);
  EXPECT_EQ(head.headers["x-method"], "HEAD");
  EXPECT_EQ(head.headers["content-length"], "8");
  EXPECT_EQ(client.read_response().body, "GET /y ");  // the next response follows directly
}

TEST(HttpServerTest, StreamedChunksArriveIncrementallyFromAnotherThread) {
  PendingRequests pending;
  HttpServer server(test_config(), pending.handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send("POST /generate_stream HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}");
  auto entry = pending.wait(0);
  ASSERT_TRUE(entry.response);
  EXPECT_EQ(server.in_flight(), 1);

  auto response = entry.response;
  std::thread engine([response] {
    response->start_stream(200, {{"Content-Type", "text/event-stream"},
                                 {"Cache-Control", "no-cache"},
                                 {"Content-Length", "999"}});  // framing is the transport's
    response->write("data:{\"index\":1}\n\n");
  });
  engine.join();
  ParsedResponse head = client.read_head();
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.chunked);
  EXPECT_EQ(head.headers.count("content-length"), 0u);
  EXPECT_EQ(head.headers["content-type"], "text/event-stream");
  EXPECT_EQ(head.headers["connection"], "keep-alive");
  // The first event is readable before the second one is even written.
  EXPECT_EQ(client.read_chunk(), "data:{\"index\":1}\n\n");

  std::thread engine2([response] {
    response->write("");  // ignored: an empty chunk would end the body
    response->write("data:{\"index\":2}\n\n");
  });
  engine2.join();
  EXPECT_EQ(client.read_chunk(), "data:{\"index\":2}\n\n");
  EXPECT_EQ(server.in_flight(), 1);
  std::thread([response] { response->finish(); }).join();
  EXPECT_EQ(client.read_chunk(), "");  // terminating chunk
  EXPECT_TRUE(eventually([&] { return server.in_flight() == 0; }));
  EXPECT_FALSE(response->closed());

  // Keep-alive after a finished stream.
  client.send("GET /health HTTP/1.1\r\nHost: a\r\n\r\n");
  auto next = pending.wait(1);
  ASSERT_TRUE(next.response);
  next.response->respond({204, {}, ""});
  ParsedResponse after = client.read_response();
  EXPECT_EQ(after.status, 204);
  EXPECT_EQ(after.headers.count("content-length"), 0u);  // 204 carries no body
}

TEST(HttpServerTest, ClientDisconnectWhileResponsePendingIsNoticed) {
  PendingRequests pending;
  HttpServer server(test_config(), pending.handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send("POST /generate HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}");
  auto entry = pending.wait(0);
  ASSERT_TRUE(entry.response);
  std::promise<void> closed;
  std::atomic<int> calls{0};
  entry.response->on_close([&] {
    if (++calls == 1) closed.set_value();
  });
  EXPECT_FALSE(entry.response->closed());
  EXPECT_EQ(server.in_flight(), 1);

  auto start = std::chrono::steady_clock::now();
  client.close();
  ASSERT_EQ(closed.get_future().wait_for(2s), std::future_status::ready);
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, 200ms);  // noticed by the outstanding read, not by a later write
  EXPECT_TRUE(entry.response->closed());
  EXPECT_TRUE(eventually([&] { return server.in_flight() == 0; }));

  entry.response->respond({200, {}, "late"});  // a no-op now
  std::atomic<int> late_calls{0};
  entry.response->on_close([&] { ++late_calls; });  // registered too late: runs at once
  EXPECT_EQ(late_calls.load(), 1);
  EXPECT_EQ(calls.load(), 1);
}

TEST(HttpServerTest, ClientDisconnectDuringIdleStreamIsNoticed) {
  PendingRequests pending;
  HttpServer server(test_config(), pending.handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send("POST /generate_stream HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}");
  auto entry = pending.wait(0);
  ASSERT_TRUE(entry.response);
  std::promise<void> closed;
  entry.response->on_close([&] { closed.set_value(); });
  entry.response->start_stream(200, {{"Content-Type", "text/event-stream"}});
  entry.response->write("data:1\n\n");
  client.read_head();
  EXPECT_EQ(client.read_chunk(), "data:1\n\n");

  client.close();  // nothing is being written: only the outstanding read can see this
  ASSERT_EQ(closed.get_future().wait_for(2s), std::future_status::ready);
  EXPECT_TRUE(entry.response->closed());
  EXPECT_TRUE(eventually([&] { return server.in_flight() == 0; }));
  entry.response->write("data:2\n\n");  // no-ops after the close
  entry.response->finish();
}

TEST(HttpServerTest, StopAcceptingRefusesNewConnectionsWhileOpenStreamFinishes) {
  PendingRequests pending;
  HttpServer server(test_config(), pending.handler());
  ASSERT_TRUE(server.start().ok());
  Client streaming(server.port());
  Client idle(server.port());
  ASSERT_TRUE(idle.connected());
  streaming.send("POST /generate_stream HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}");
  auto entry = pending.wait(0);
  ASSERT_TRUE(entry.response);
  entry.response->start_stream(200, {{"Content-Type", "text/event-stream"}});
  streaming.read_head();

  server.stop_accepting();
  Client refused(server.port());
  EXPECT_FALSE(refused.connected());
  EXPECT_EQ(refused.connect_errno(), ECONNREFUSED);
  EXPECT_TRUE(idle.at_eof());  // idle keep-alive connections are closed
  EXPECT_EQ(server.in_flight(), 1);

  entry.response->write("data:last\n\n");
  entry.response->finish();
  EXPECT_EQ(streaming.read_chunk(), "data:last\n\n");
  EXPECT_EQ(streaming.read_chunk(), "");
  EXPECT_TRUE(streaming.at_eof());  // no keep-alive while draining
  EXPECT_TRUE(eventually([&] { return server.in_flight() == 0; }));
  EXPECT_FALSE(entry.response->closed());  // finished normally, the client did not leave
}

TEST(HttpServerTest, StopClosesOpenStreamsAndStreamsMayOutliveTheServer) {
  PendingRequests pending;
  std::shared_ptr<ResponseStream> kept;
  std::atomic<int> close_calls{0};
  {
    HttpServer server(test_config(), pending.handler());
    ASSERT_TRUE(server.start().ok());
    Client client(server.port());
    client.send("POST /generate_stream HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}");
    kept = pending.wait(0).response;
    ASSERT_TRUE(kept);
    kept->on_close([&] { ++close_calls; });
    kept->start_stream(200, {});
    server.stop();
    EXPECT_EQ(close_calls.load(), 1);
    EXPECT_TRUE(kept->closed());
    EXPECT_EQ(server.in_flight(), 0);
    EXPECT_TRUE(client.drain_to_eof());
  }
  // The server is gone; the engine may still hold the stream and call it.
  kept->write("data:after\n\n");
  kept->finish();
  kept.reset();
  EXPECT_EQ(close_calls.load(), 1);
}

TEST(HttpServerTest, TwoHundredConcurrentConnectionsOnTwoIoThreads) {
  constexpr int kNumClients = 200;
  PendingRequests pending;
  HttpServerConfig config = test_config();
  config.num_io_threads = 2;
  HttpServer server(config, pending.handler());
  ASSERT_TRUE(server.start().ok());

  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kNumClients; ++i) {
    clients.push_back(std::make_unique<Client>(server.port()));
    ASSERT_TRUE(clients.back()->connected());
    clients.back()->send("GET /n/" + std::to_string(i) + " HTTP/1.1\r\nHost: a\r\n\r\n");
  }
  // Every request is pending at once: none of them holds a thread.
  pending.wait(kNumClients - 1, kNumClients);
  EXPECT_EQ(server.in_flight(), kNumClients);
  std::thread responder([&] {
    for (int i = 0; i < kNumClients; ++i) {
      auto entry = pending.wait(static_cast<size_t>(i));
      entry.response->respond({200, {{"Content-Type", "text/plain"}}, entry.request.path});
    }
  });
  for (int i = 0; i < kNumClients; ++i) {
    ParsedResponse response = clients[static_cast<size_t>(i)]->read_response();
    EXPECT_EQ(response.status, 200);
    EXPECT_EQ(response.body, "/n/" + std::to_string(i));
  }
  responder.join();
  EXPECT_TRUE(eventually([&] { return server.in_flight() == 0; }));
}

TEST(HttpServerTest, InvalidHostnameFallsBackToAllInterfaces) {
  HttpServerConfig config = test_config();
  config.hostname = "not an address";
  HttpServer server(config, echo_handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());  // 0.0.0.0 includes loopback
  client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(client.read_response().status, 200);
}

TEST(HttpServerTest, PortInUseIsAnError) {
  HttpServer first(test_config(), echo_handler());
  ASSERT_TRUE(first.start().ok());
  HttpServerConfig config = test_config();
  config.port = first.port();
  HttpServer second(config, echo_handler());
  Status status = second.start();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("bind"), std::string::npos) << status.error().message;
}

TEST(HttpServerTest, Http10ClientGetsCloseDelimitedStream) {
  PendingRequests pending;
  HttpServer server(test_config(), pending.handler());
  ASSERT_TRUE(server.start().ok());
  Client client(server.port());
  client.send("GET /s HTTP/1.0\r\n\r\n");
  auto entry = pending.wait(0);
  ASSERT_TRUE(entry.response);
  entry.response->start_stream(200, {});
  entry.response->write("abc");
  entry.response->write("def");
  entry.response->finish();
  ParsedResponse head = client.read_head();
  EXPECT_FALSE(head.chunked);
  EXPECT_EQ(head.headers["connection"], "close");
  EXPECT_EQ(client.read_exact(6), "abcdef");
  EXPECT_TRUE(client.at_eof());
}

}  // namespace
}  // namespace lm
