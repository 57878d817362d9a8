// The asynchronous HTTP/1.1 server (Boost.Beast on Asio): a few I/O threads serve every
// connection, keep-alive and streamed (SSE) responses; handlers run on an I/O thread and must
// not block (generation is handed to the engine thread).
#pragma once

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
  // Closes everything and joins the I/O threads.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lm
