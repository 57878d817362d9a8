// The asynchronous HTTP/1.1 server (Boost.Beast on Asio): a few I/O threads serve every
// connection, keep-alive and streamed (SSE) responses; handlers run on an I/O thread and must
// not block (generation is handed to the engine thread). Slow or stalled clients are bounded:
// timeouts on every wait for the client, a cap on open connections and on queued response bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "server/transport/http_types.h"

namespace lm {

struct HttpServerConfig {
  std::string hostname = "0.0.0.0";
  int port = 3000;  // 0 picks a free port (tests)
  int num_io_threads = 2;
  uint64_t payload_limit = 2000000;  // bytes of body; larger gets TGI's 413
  uint32_t max_header_bytes = 16384;

  // Waits for the client, each closing the connection when it runs out (zero: no limit). The
  // defaults are nginx's (client_header_timeout, client_body_timeout, keepalive_timeout,
  // send_timeout).
  // From accept (or the next request's first byte) to the end of the request head; 408 then close
  // (a connection that sent nothing is closed without a response).
  std::chrono::milliseconds header_timeout = std::chrono::seconds(60);
  // Between two reads of a request body (a body may take longer in all if it keeps arriving); 408.
  std::chrono::milliseconds body_timeout = std::chrono::seconds(60);
  // Idle between requests on a kept-alive connection; closed without a response.
  std::chrono::milliseconds keepalive_timeout = std::chrono::seconds(75);
  // A pending response write that makes no progress (the client stopped reading): the connection
  // is closed, which cancels its request as a disconnect does (ResponseStream::on_close).
  std::chrono::milliseconds send_timeout = std::chrono::seconds(60);
  // Response bytes a connection may queue behind a write in progress; a client that falls further
  // behind is closed as stalled.
  size_t max_queued_bytes = size_t{4} << 20;
  // SO_SNDBUF of each connection (0: the kernel's autotuning, up to tcp_wmem's max, 4 MiB by
  // default): bounds what the kernel holds for a client that stopped reading, before the queue
  // above and send_timeout take over (nginx's `listen ... sndbuf=`).
  int socket_send_buffer_bytes = 0;
  // Open connections served at once (0: no cap). Past it a connection is answered
  // `connection_limit_response` (Connection: close) and closed, while open ones are served on.
  size_t max_connections = 0;
  HttpResponse connection_limit_response{503, {}, ""};
};

class HttpServer {
 public:
  HttpServer(HttpServerConfig config, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts listening and the I/O threads; returns once the port accepts connections.
  Status start();
  int port() const;  // the bound port (after start)
  // Stops accepting new connections; open requests and streams continue.
  void stop_accepting();
  // Number of requests whose response has not finished (for graceful drain).
  int64_t in_flight() const;
  // Open connections counted against max_connections (not those being refused).
  int64_t open_connections() const;
  // Closes everything and joins the I/O threads.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lm
