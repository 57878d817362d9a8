// Plain HTTP request/response values exchanged between the HTTP transport (http_server) and
// the route handlers, so handlers never see Beast types.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lm {

struct HttpRequest {
  std::string method;                          // "GET", "POST", "OPTIONS", ...
  std::string target;                          // as sent: path + optional "?query"
  std::string path;                            // target without the query
  std::map<std::string, std::string> headers;  // names lower-cased; repeated headers joined by ", "
  std::string body;
  // When the transport had the whole request: request timings start here, so time spent queued
  // for a validation worker counts (unset: the handler's own start).
  std::chrono::steady_clock::time_point received{};
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Type among them
  std::string body;
};

// The response to one request, produced asynchronously and possibly streamed. Thread-safe: any
// thread (an HTTP thread, the engine thread through a TokenSink) may call it; the transport
// serializes writes on the connection. Exactly one of respond() or start_stream()...finish().
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // A complete response (Content-Length framing).
  virtual void respond(HttpResponse response) = 0;
  // Starts a streamed response (chunked transfer encoding); body follows in write() calls.
  virtual void start_stream(int status,
                            std::vector<std::pair<std::string, std::string>> headers) = 0;
  virtual void write(std::string chunk) = 0;
  virtual void finish() = 0;
  // True once the client has gone away (read EOF/reset or a failed write); later calls are no-ops.
  virtual bool closed() const = 0;
  // Called once, on any thread, when the client goes away before the response finished.
  virtual void on_close(std::function<void()> callback) = 0;
};

using HttpHandler =
    std::function<void(HttpRequest request, std::shared_ptr<ResponseStream> response)>;

}  // namespace lm
