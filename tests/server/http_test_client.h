// A blocking HTTP/1.1 test client on a POSIX socket and a handler that parks requests for the test
// thread to answer: what the transport tests (http_server*_test.cc) drive the server with.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/transport/http_types.h"

namespace lm {

struct ParsedResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
  bool chunked = false;
};

// A blocking HTTP/1.1 client on a POSIX socket with a receive timeout, so a broken server fails
// a test instead of hanging it.
class Client {
 public:
  // receive_buffer > 0 sets SO_RCVBUF before connecting (a small window for stalled readers).
  explicit Client(int port, int receive_buffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval timeout{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    if (receive_buffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      connect_errno_ = errno;
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~Client() { close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  int connect_errno() const { return connect_errno_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  void send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      ASSERT_GT(n, 0) << "send failed: " << std::strerror(errno);
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  // Everything up to and including `delim`; empty if the connection ended first.
  std::string read_until(std::string_view delim) {
    size_t pos;
    while ((pos = buffer_.find(delim)) == std::string::npos) {
      if (!fill()) return "";
    }
    std::string out = buffer_.substr(0, pos + delim.size());
    buffer_.erase(0, pos + delim.size());
    return out;
  }

  std::string read_exact(size_t n) {
    while (buffer_.size() < n) {
      if (!fill()) return "";
    }
    std::string out = buffer_.substr(0, n);
    buffer_.erase(0, n);
    return out;
  }

  // Status line and headers only.
  ParsedResponse read_head() {
    ParsedResponse response;
    std::string head = read_until("\r\n\r\n");
    if (head.size() < 12) return response;
    response.status = std::stoi(head.substr(9, 3));
    size_t line_start = head.find("\r\n") + 2;
    while (line_start < head.size() - 2) {
      size_t line_end = head.find("\r\n", line_start);
      std::string line = head.substr(line_start, line_end - line_start);
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t value_start = line.find_first_not_of(' ', colon + 1);
      response.headers[name] = value_start == std::string::npos ? "" : line.substr(value_start);
      line_start = line_end + 2;
    }
    response.chunked = response.headers["transfer-encoding"] == "chunked";
    return response;
  }

  // One chunk's data; "" for the terminating chunk (or if the connection ended).
  std::string read_chunk() {
    std::string size_line = read_until("\r\n");
    if (size_line.empty()) return "";
    size_t size = std::stoul(size_line, nullptr, 16);
    std::string data = read_exact(size + 2);
    return size == 0 ? "" : data.substr(0, size);
  }

  ParsedResponse read_response(bool has_body = true) {
    ParsedResponse response = read_head();
    if (!has_body) return response;
    if (response.chunked) {
      for (std::string chunk = read_chunk(); !chunk.empty(); chunk = read_chunk()) {
        response.body += chunk;
      }
    } else if (response.headers.count("content-length")) {
      response.body = read_exact(std::stoul(response.headers["content-length"]));
    }
    return response;
  }

  // True when the server closed the connection with nothing more to read.
  bool at_eof() { return buffer_.empty() && !fill(); }

  // Discards whatever arrives until the server closes; false if it stays open (timeout).
  bool drain_to_eof() {
    buffer_.clear();
    char chunk[4096];
    ssize_t n;
    while ((n = ::recv(fd_, chunk, sizeof(chunk), 0)) > 0) {
    }
    return n == 0 || errno == ECONNRESET;
  }

  // Discards what read_head() buffered, else reads and discards at most `max` bytes; how many
  // (0: closed or timed out).
  size_t discard_some(size_t max) {
    if (!buffer_.empty()) {
      size_t n = buffer_.size();
      buffer_.clear();
      return n;
    }
    std::vector<char> chunk(max);
    ssize_t n = ::recv(fd_, chunk.data(), max, 0);
    return n > 0 ? static_cast<size_t>(n) : 0;
  }

 private:
  bool fill() {
    char chunk[4096];
    ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  int connect_errno_ = 0;
  std::string buffer_;
};

// Collects requests with their response streams for the test thread to answer.
class PendingRequests {
 public:
  struct Entry {
    HttpRequest request;
    std::shared_ptr<ResponseStream> response;
  };

  HttpHandler handler() {
    return [this](HttpRequest request, std::shared_ptr<ResponseStream> response) {
      std::lock_guard lock(mutex_);
      entries_.push_back({std::move(request), std::move(response)});
      changed_.notify_all();
    };
  }

  // Waits until `count` requests arrived; returns entry `index`.
  Entry wait(size_t index, size_t count = 0) {
    std::unique_lock lock(mutex_);
    bool ok = changed_.wait_for(lock, std::chrono::seconds(5),
                                [&] { return entries_.size() >= std::max(count, index + 1); });
    EXPECT_TRUE(ok) << "timed out waiting for request " << index;
    return ok ? entries_[index] : Entry{};
  }

  size_t size() {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Entry> entries_;
};

// Polls `condition` for up to two seconds (the server updates some state just after a write).
template <typename Fn>
bool eventually(Fn condition) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return condition();
}

}  // namespace lm
