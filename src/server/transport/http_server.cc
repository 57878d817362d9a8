// The HTTP/1.1 transport: an acceptor and one state machine per connection, each on its own
// strand, all run by a few I/O threads. Beast parses requests; http_wire frames responses. Every
// wait on the client has a deadline (one lazily re-armed timer per connection), so slow or stalled
// clients cost a bounded time, and the acceptor refuses connections past the configured cap.
#include "server/transport/http_server.h"

#include <fmt/format.h>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/check.h"
#include "base/log.h"
#include "server/transport/http_wire.h"

namespace lm {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;
using Strand = net::strand<net::io_context::executor_type>;
using Socket = tcp::socket::rebind_executor<Strand>::other;
using http_wire::BodyFraming;

constexpr size_t kReadSize = 8192;
// While a response is pending a read only watches for EOF (or pipelined bytes), so it uses a
// small buffer: thousands of idle SSE streams should cost little memory.
constexpr size_t kWatchReadSize = 512;
// Bytes a pipelining client may send ahead while a response is pending; past this we stop
// reading (and rely on a failed write to notice a disconnect).
constexpr size_t kMaxReadAhead = 65536;
// After an error response we half-close and drain the client's remaining bytes for at most this
// long, so the close does not turn into a reset that destroys the response in flight.
constexpr auto kLingerTime = std::chrono::seconds(2);
// Connections past max_connections that may be answered at once (each holds a socket for up to
// kLingerTime); past these, new connections are closed unanswered.
constexpr int64_t kMaxRefusing = 64;
constexpr std::string_view kPayloadTooLarge =
    "Failed to buffer the request body: length limit exceeded";

std::string_view view(beast::string_view text) { return {text.data(), text.size()}; }

class Connection;

// What the server and its connections share. It outlives HttpServer while a handler still holds
// a ResponseStream, because sockets and strands must never outlive their io_context.
struct Shared {
  Shared(HttpServerConfig config_in, HttpHandler handler_in)
      : config(std::move(config_in)), handler(std::move(handler_in)) {}

  // Posts fn to a connection's strand, unless stop() has finished: the I/O threads are gone
  // then, and a queued handler would keep its connection (and this object) alive forever.
  template <typename Fn>
  void post(const Strand& strand, Fn&& fn) {
    std::lock_guard lock(mutex);
    if (!stopped) net::post(strand, std::forward<Fn>(fn));
  }

  const HttpServerConfig config;
  const HttpHandler handler;
  net::io_context io;
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> open_connections{0};  // sockets of served connections
  std::atomic<int64_t> refusing{0};          // sockets being answered connection_limit_response
  std::atomic<bool> draining{false};         // stop_accepting(): no more keep-alive

  // Guards `stopped` and `connections` (the registry stop() and stop_accepting() walk).
  std::mutex mutex;
  bool stopped = false;
  std::unordered_map<const Connection*, std::weak_ptr<Connection>> connections;
};

class StreamImpl;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `counter` is the Shared count this connection's socket is held in until it closes.
  Connection(std::shared_ptr<Shared> shared, Strand strand, Socket socket,
             std::atomic<int64_t>* counter)
      : shared_(std::move(shared)),
        strand_(std::move(strand)),
        socket_(std::move(socket)),
        deadline_timer_(strand_),
        counter_(counter) {}
  ~Connection() {
    release_count();
    std::lock_guard lock(shared_->mutex);
    shared_->connections.erase(this);
  }

  const Strand& strand() const { return strand_; }
  Shared& shared() { return *shared_; }

  // Everything below runs on the strand.
  void start() {
    error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);  // SSE events are small and must go out now
    if (int bytes = shared_->config.socket_send_buffer_bytes; bytes > 0) {
      socket_.set_option(net::socket_base::send_buffer_size(bytes), ec);
    }
    new_parser();
    expect(Wait::kHead);  // the first request's head is due header_timeout after the accept
    read_more();
  }
  // A connection past max_connections: answered, then closed like any Connection: close reply.
  void refuse() { reject(shared_->config.connection_limit_response); }
  void close_if_idle() {
    if (state_ == State::kReading && !parser_->got_some() && buffer_.size() == 0) close_now();
  }
  // Bytes of the current response from StreamImpl; `last` ends the response.
  void deliver(std::string bytes, bool last, bool close_after);
  void close_now();

 private:
  enum class State {
    kReading,     // parsing the next request
    kResponding,  // a request (or an error response) is being answered; reads only watch for EOF
    kLingering,   // last response sent with Connection: close; send side shut, draining input
    kClosed,
  };
  // What the connection waits for from the client, each with its timeout from the config.
  enum class Wait {
    kNone,  // the handler (or nothing: lingering has its own timer)
    kIdle,  // the first byte of the next request on a kept-alive connection
    kHead,  // the rest of a request head (deadline fixed when the wait starts)
    kBody,  // more of a request body (deadline moved on by every read)
    kSend,  // progress of a pending write (deadline moved on by every partial write)
  };
  using Clock = std::chrono::steady_clock;

  void expect(Wait wait);
  void arm_deadline_timer(Clock::time_point when);
  void on_deadline_timer(error_code ec);
  void deadline_passed();
  void release_count();

  void new_parser();
  void read_more();
  void on_read(error_code ec, size_t num_bytes);
  void append_read(size_t num_bytes);
  void parse_buffered();
  void maybe_send_continue();
  void reject(HttpResponse response);
  void reject_text(int status, std::string_view body);
  void dispatch();
  void flush();
  void on_write(error_code ec);
  void after_response();
  void begin_linger();

  std::shared_ptr<Shared> shared_;  // first member: destroyed last, after the socket
  const Strand strand_;
  Socket socket_;
  // NOTE: reads land in read_buffer_ and are copied into buffer_ on the strand. Reading into
  // buffer_ directly would let parsing (consume) move its write position under a read that is
  // kept outstanding across requests to notice disconnects.
  std::vector<char> read_buffer_;
  beast::flat_buffer buffer_;  // received bytes not yet parsed
  std::optional<http::request_parser<http::string_body>> parser_;
  State state_ = State::kReading;
  bool reading_ = false;
  bool writing_ = false;
  bool continue_checked_ = false;
  bool last_queued_ = false;  // the final bytes of the current response are queued
  bool close_after_response_ = false;
  bool counted_in_flight_ = false;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;  // delivered response bytes in queue_ (not yet handed to a write)
  std::vector<std::string> sending_;
  std::shared_ptr<StreamImpl> stream_;
  std::optional<net::steady_timer> linger_timer_;
  // NOTE: the deadline moves on every read or partial write; the timer is only re-armed when it
  // would fire too late, and when it fires early it re-arms for the current deadline.
  Wait wait_ = Wait::kNone;
  Clock::time_point deadline_;
  net::steady_timer deadline_timer_;
  bool deadline_timer_armed_ = false;
  Clock::time_point deadline_timer_expiry_;
  std::atomic<int64_t>* counter_;  // Shared::open_connections or refusing; null once released
};

// The handler's view of one response. Formats bytes on the caller's thread and posts them to the
// connection's strand; the mutex keeps one stream's writes in call order across threads.
class StreamImpl final : public ResponseStream {
 public:
  StreamImpl(std::shared_ptr<Connection> connection, bool head, bool keep_alive, bool chunked)
      : connection_(std::move(connection)),
        head_(head),
        keep_alive_(keep_alive),
        chunked_(chunked) {}

  void respond(HttpResponse response) override {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    LM_CHECK_MSG(phase_ == Phase::kIdle, "respond() on a response that already started");
    phase_ = Phase::kDone;
    bool keep_alive = keep_alive_ && !connection_->shared().draining;
    std::string bytes = http_wire::format_response_head(response.status, response.headers,
                                                        BodyFraming::kContentLength,
                                                        response.body.size(), keep_alive);
    if (!head_ && http_wire::status_has_body(response.status)) bytes += response.body;
    send(std::move(bytes), /*last=*/true, !keep_alive);
  }

  void start_stream(int status, std::vector<std::pair<std::string, std::string>> headers) override {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    LM_CHECK_MSG(phase_ == Phase::kIdle, "start_stream() on a response that already started");
    phase_ = Phase::kStreaming;
    stream_keep_alive_ = chunked_ && keep_alive_ && !connection_->shared().draining;
    BodyFraming framing = chunked_ ? BodyFraming::kChunked : BodyFraming::kUntilClose;
    send(http_wire::format_response_head(status, headers, framing, 0, stream_keep_alive_),
         /*last=*/false, !stream_keep_alive_);
  }

  void write(std::string chunk) override {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    LM_CHECK_MSG(phase_ == Phase::kStreaming, "write() outside start_stream()...finish()");
    if (head_ || chunk.empty()) return;
    send(chunked_ ? http_wire::format_chunk(chunk) : std::move(chunk), false, false);
  }

  void finish() override {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    LM_CHECK_MSG(phase_ == Phase::kStreaming, "finish() without start_stream()");
    phase_ = Phase::kDone;
    send(std::string(chunked_ && !head_ ? http_wire::kLastChunk : ""), true, !stream_keep_alive_);
  }

  bool closed() const override { return closed_.load(); }

  void on_close(std::function<void()> callback) override {
    {
      std::lock_guard lock(mutex_);
      if (!closed_) {
        on_close_ = std::move(callback);
        return;
      }
      if (!gone_early_) return;
    }
    callback();  // the client left before this callback was registered
  }

  // The connection closed (on its strand). Runs the callback when the response was unfinished.
  void mark_closed() {
    std::function<void()> callback;
    {
      std::lock_guard lock(mutex_);
      if (closed_) return;
      closed_ = true;
      gone_early_ = phase_ != Phase::kDone;
      if (gone_early_) callback = std::move(on_close_);
      on_close_ = nullptr;
    }
    if (callback) callback();
  }

 private:
  enum class Phase { kIdle, kStreaming, kDone };

  void send(std::string bytes, bool last, bool close_after) {
    connection_->shared().post(
        connection_->strand(),
        [connection = connection_, bytes = std::move(bytes), last, close_after]() mutable {
          connection->deliver(std::move(bytes), last, close_after);
        });
  }

  const std::shared_ptr<Connection> connection_;
  const bool head_;        // HEAD request: headers only
  const bool keep_alive_;  // the request allows keep-alive
  const bool chunked_;     // HTTP/1.1 client; 1.0 streams are delimited by closing instead
  std::mutex mutex_;
  std::atomic<bool> closed_{false};
  Phase phase_ = Phase::kIdle;  // guarded by mutex_, as are the fields below
  bool stream_keep_alive_ = false;
  bool gone_early_ = false;  // closed before the response finished
  std::function<void()> on_close_;
};

void Connection::new_parser() {
  parser_.emplace();
  parser_->body_limit(shared_->config.payload_limit);
  parser_->header_limit(shared_->config.max_header_bytes);
  parser_->eager(true);
  continue_checked_ = false;
}

void Connection::read_more() {
  if (reading_ || state_ == State::kClosed) return;
  if (state_ == State::kResponding && buffer_.size() >= kMaxReadAhead) return;
  reading_ = true;
  size_t read_size = state_ == State::kReading ? kReadSize : kWatchReadSize;
  if (read_buffer_.size() != read_size) read_buffer_ = std::vector<char>(read_size);
  socket_.async_read_some(net::buffer(read_buffer_),
                          [self = shared_from_this()](error_code ec, size_t num_bytes) {
                            self->on_read(ec, num_bytes);
                          });
}

void Connection::on_read(error_code ec, size_t num_bytes) {
  reading_ = false;
  if (state_ == State::kClosed) return;
  if (ec) {  // EOF or reset: the client is gone (a half-close counts as gone, see http_types.h)
    close_now();
    return;
  }
  switch (state_) {
    case State::kReading:
      append_read(num_bytes);
      if (wait_ == Wait::kIdle) expect(Wait::kHead);  // the next request's head is now due
      parse_buffered();
      break;
    case State::kResponding:  // pipelined bytes wait until the response is done
      append_read(num_bytes);
      break;
    case State::kLingering:  // discarded
      break;
    case State::kClosed:
      return;
  }
  read_more();
}

void Connection::append_read(size_t num_bytes) {
  auto space = buffer_.prepare(num_bytes);
  std::memcpy(space.data(), read_buffer_.data(), num_bytes);
  buffer_.commit(num_bytes);
}

void Connection::parse_buffered() {
  while (state_ == State::kReading && buffer_.size() > 0) {
    error_code ec;
    size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == http::error::need_more) break;
    if (ec == http::error::body_limit) return reject_text(413, kPayloadTooLarge);
    if (ec == http::error::header_limit) return reject_text(431, "");
    if (ec) return reject_text(400, "");
    if (parser_->is_done()) return dispatch();
    if (used == 0) break;
  }
  if (state_ != State::kReading) return;
  if (parser_->is_header_done()) expect(Wait::kBody);  // each read of the body restarts the wait
  maybe_send_continue();
}

// curl and others wait for "100 Continue" before sending a body announced with Expect.
void Connection::maybe_send_continue() {
  if (continue_checked_ || !parser_->is_header_done()) return;
  continue_checked_ = true;
  const auto& request = parser_->get();
  if (request.version() >= 11 && beast::iequals(request[http::field::expect], "100-continue")) {
    queue_.emplace_back(http_wire::kContinue);
    flush();
  }
}

void Connection::reject(HttpResponse response) {
  state_ = State::kResponding;
  expect(Wait::kNone);
  parser_.reset();
  queue_.push_back(http_wire::format_response_head(response.status, response.headers,
                                                   BodyFraming::kContentLength,
                                                   response.body.size(), /*keep_alive=*/false));
  queue_.back() += response.body;
  last_queued_ = true;
  close_after_response_ = true;
  flush();
}

void Connection::reject_text(int status, std::string_view body) {
  HttpResponse response{status, {}, std::string(body)};
  if (!body.empty()) response.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  reject(std::move(response));
}

void Connection::dispatch() {
  http::request<http::string_body> message = parser_->release();
  parser_.reset();
  state_ = State::kResponding;
  expect(Wait::kNone);  // the handler takes as long as it takes; its writes have send_timeout
  if (buffer_.size() == 0) buffer_.shrink_to_fit();

  HttpRequest request;
  request.method = std::string(view(message.method_string()));
  request.target = std::string(view(message.target()));
  request.path = request.target.substr(0, request.target.find('?'));
  for (const auto& field : message) {
    std::string name = http_wire::to_lower_ascii(view(field.name_string()));
    auto [it, inserted] = request.headers.emplace(name, std::string(view(field.value())));
    if (!inserted) {
      it->second += ", ";
      it->second += view(field.value());
    }
  }
  request.body = std::move(message.body());
  request.received = std::chrono::steady_clock::now();

  counted_in_flight_ = true;
  ++shared_->in_flight;
  stream_ = std::make_shared<StreamImpl>(shared_from_this(), message.method() == http::verb::head,
                                         message.keep_alive(), message.version() >= 11);
  try {
    shared_->handler(std::move(request), stream_);
  } catch (const std::exception& e) {
    log_error(std::string("HTTP handler threw: ") + e.what());
    close_now();
  }
}

void Connection::deliver(std::string bytes, bool last, bool close_after) {
  if (state_ != State::kResponding) return;  // closed meanwhile
  // Judged by what was already waiting: one event larger than the cap (a long echoed prompt's
  // logprobs) is not a client that stopped reading.
  const auto behind_before = queued_bytes_;
  if (!bytes.empty()) {
    queued_bytes_ += bytes.size();
    queue_.push_back(std::move(bytes));
  }
  if (close_after) close_after_response_ = true;
  if (last) last_queued_ = true;
  flush();
  if (behind_before > shared_->config.max_queued_bytes &&
      queued_bytes_ > shared_->config.max_queued_bytes) {
    log_warn(fmt::format(
        "Closed a connection whose client stopped reading: {} response bytes queued behind a "
        "pending write (limit {}); its request is cancelled",
        queued_bytes_, shared_->config.max_queued_bytes));
    close_now();
  }
}

// Starts a gathered write of everything queued, or completes the response when all is sent.
void Connection::flush() {
  if (writing_ || state_ == State::kClosed) return;
  if (queue_.empty()) {
    if (wait_ == Wait::kSend) expect(Wait::kNone);
    if (last_queued_ && state_ == State::kResponding) after_response();
    return;
  }
  sending_.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
  queue_.clear();
  queued_bytes_ = 0;
  std::vector<net::const_buffer> buffers;
  buffers.reserve(sending_.size());
  for (const std::string& bytes : sending_) buffers.push_back(net::buffer(bytes));
  writing_ = true;
  // While a request waits for its response, a write must keep making progress. (A 100 Continue
  // sent while the body is read is covered by the body's own wait.)
  if (state_ == State::kResponding) expect(Wait::kSend);
  // The completion condition sees every partial write (on the strand): each one is progress.
  auto progress = [this, num_written = size_t{0}](error_code ec, size_t total) mutable -> size_t {
    if (total > num_written && wait_ == Wait::kSend) expect(Wait::kSend);
    num_written = total;
    return net::transfer_all()(ec, total);
  };
  net::async_write(socket_, buffers, progress,
                   [self = shared_from_this()](error_code ec, size_t) { self->on_write(ec); });
}

void Connection::on_write(error_code ec) {
  writing_ = false;
  sending_.clear();
  if (state_ == State::kClosed) return;
  if (ec) return close_now();
  flush();
}

void Connection::after_response() {
  last_queued_ = false;
  stream_.reset();
  if (counted_in_flight_) {
    counted_in_flight_ = false;
    --shared_->in_flight;
  }
  if (close_after_response_ || shared_->draining) return begin_linger();
  state_ = State::kReading;
  new_parser();
  expect(buffer_.size() == 0 ? Wait::kIdle : Wait::kHead);  // pipelined bytes start a head
  parse_buffered();
  read_more();
}

void Connection::begin_linger() {
  state_ = State::kLingering;
  expect(Wait::kNone);
  buffer_.consume(buffer_.size());
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  linger_timer_.emplace(strand_, kLingerTime);
  linger_timer_->async_wait([self = shared_from_this()](error_code wait_ec) {
    if (!wait_ec) self->close_now();
  });
  read_more();
}

void Connection::close_now() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  error_code ec;
  socket_.close(ec);  // pending reads and writes complete with operation_aborted
  release_count();
  if (linger_timer_) linger_timer_->cancel();
  wait_ = Wait::kNone;
  deadline_timer_.cancel();
  queue_.clear();
  queued_bytes_ = 0;
  parser_.reset();
  if (counted_in_flight_) {
    counted_in_flight_ = false;
    --shared_->in_flight;
  }
  if (std::shared_ptr<StreamImpl> stream = std::move(stream_)) stream->mark_closed();
}

void Connection::release_count() {
  if (counter_ != nullptr) --*counter_;
  counter_ = nullptr;
}

void Connection::expect(Wait wait) {
  wait_ = wait;
  std::chrono::milliseconds timeout{0};
  const HttpServerConfig& config = shared_->config;
  switch (wait) {
    case Wait::kNone:
      return;  // a pending timer fires and finds nothing to do
    case Wait::kIdle:
      timeout = config.keepalive_timeout;
      break;
    case Wait::kHead:
      timeout = config.header_timeout;
      break;
    case Wait::kBody:
      timeout = config.body_timeout;
      break;
    case Wait::kSend:
      timeout = config.send_timeout;
      break;
  }
  if (timeout.count() <= 0) {  // this wait is unlimited (wait_ still says what is awaited)
    deadline_ = Clock::time_point::max();
    return;
  }
  deadline_ = Clock::now() + timeout;
  if (!deadline_timer_armed_ || deadline_timer_expiry_ > deadline_) arm_deadline_timer(deadline_);
}

void Connection::arm_deadline_timer(Clock::time_point when) {
  deadline_timer_armed_ = true;
  deadline_timer_expiry_ = when;
  deadline_timer_.expires_at(when);  // cancels a wait that would fire later
  deadline_timer_.async_wait(
      [self = shared_from_this()](error_code ec) { self->on_deadline_timer(ec); });
}

void Connection::on_deadline_timer(error_code ec) {
  if (ec || state_ == State::kClosed) return;  // re-armed (a newer wait is pending) or closed
  deadline_timer_armed_ = false;
  if (wait_ == Wait::kNone || deadline_ == Clock::time_point::max()) return;
  if (Clock::now() < deadline_) return arm_deadline_timer(deadline_);  // moved on meanwhile
  deadline_passed();
}

void Connection::deadline_passed() {
  switch (wait_) {
    case Wait::kNone:
      return;
    case Wait::kIdle:
      return close_now();
    case Wait::kHead:
      // A connection that never sent a byte gets no answer (nginx's choice); a partial head 408.
      if (buffer_.size() == 0 && !(parser_ && parser_->got_some())) return close_now();
      return reject_text(408, "");
    case Wait::kBody:
      return reject_text(408, "");
    case Wait::kSend:
      log_warn(fmt::format(
          "Closed a connection whose client stopped reading: no write progress for {} ms; its "
          "request is cancelled",
          shared_->config.send_timeout.count()));
      return close_now();
  }
}

}  // namespace

struct HttpServer::Impl {
  Impl(HttpServerConfig config, HttpHandler handler)
      : shared(std::make_shared<Shared>(std::move(config), std::move(handler))),
        accept_strand(net::make_strand(shared->io)),
        acceptor(accept_strand),
        retry_timer(accept_strand) {}

  void accept() {
    Strand strand = net::make_strand(shared->io);
    acceptor.async_accept(strand, [this, strand](error_code ec, Socket socket) {
      if (!acceptor.is_open()) return;
      if (ec) {
        // Typically out of file descriptors: back off instead of spinning.
        log_warn("HTTP accept failed: " + ec.message());
        retry_timer.expires_after(std::chrono::milliseconds(50));
        retry_timer.async_wait([this](error_code wait_ec) {
          if (!wait_ec && acceptor.is_open()) accept();
        });
        return;
      }
      // Served, refused with connection_limit_response, or (past kMaxRefusing) closed at once.
      const size_t max_connections = shared->config.max_connections;
      const bool refused = max_connections != 0 &&
                           static_cast<size_t>(shared->open_connections.load()) >= max_connections;
      if (refused && shared->refusing.load() >= kMaxRefusing) {
        error_code ignored;
        socket.close(ignored);
        return accept();
      }
      std::atomic<int64_t>* counter = refused ? &shared->refusing : &shared->open_connections;
      ++*counter;
      auto connection = std::make_shared<Connection>(shared, strand, std::move(socket), counter);
      {
        std::lock_guard lock(shared->mutex);
        shared->connections.emplace(connection.get(), connection);
      }
      if (refused) {
        net::post(strand, [connection] { connection->refuse(); });
      } else {
        net::post(strand, [connection] { connection->start(); });
      }
      accept();
    });
  }

  // On accept_strand: no connection can be registered after this.
  void close_acceptor() {
    error_code ec;
    acceptor.close(ec);
    retry_timer.cancel();
  }

  std::vector<std::shared_ptr<Connection>> live_connections() {
    std::vector<std::shared_ptr<Connection>> out;
    std::lock_guard lock(shared->mutex);
    for (auto& [key, weak] : shared->connections) {
      if (auto connection = weak.lock()) out.push_back(std::move(connection));
    }
    return out;
  }

  // Runs fn on accept_strand and waits for it, unless called from an I/O thread (a handler),
  // where waiting could deadlock.
  template <typename Fn>
  void on_accept_strand(Fn fn) {
    if (accept_strand.running_in_this_thread()) return fn();
    if (shared->io.get_executor().running_in_this_thread()) return net::post(accept_strand, fn);
    std::promise<void> done;
    net::post(accept_strand, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }

  std::shared_ptr<Shared> shared;  // first member: destroyed after the acceptor and timer
  Strand accept_strand;
  net::basic_socket_acceptor<tcp, Strand> acceptor;
  net::basic_waitable_timer<std::chrono::steady_clock, net::wait_traits<std::chrono::steady_clock>,
                            Strand>
      retry_timer;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::mutex lifecycle_mutex;  // start/stop_accepting/stop against each other
  bool started = false;
  bool stopped = false;
  int port = 0;
};

HttpServer::HttpServer(HttpServerConfig config, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(handler))) {
  LM_CHECK_MSG(impl_->shared->handler != nullptr, "HttpServer needs a handler");
  LM_CHECK(impl_->shared->config.num_io_threads > 0);
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  std::lock_guard lifecycle(impl_->lifecycle_mutex);
  LM_CHECK_MSG(!impl_->started, "HttpServer::start() called twice");
  const HttpServerConfig& config = impl_->shared->config;
  error_code ec;
  net::ip::address address = net::ip::make_address(config.hostname, ec);
  if (ec) {
    log_warn("Invalid hostname, defaulting to 0.0.0.0");
    address = net::ip::address_v4::any();
  }
  if (config.port < 0 || config.port > 65535) {
    return Error{"Invalid port " + std::to_string(config.port) + ": expected 0 to 65535."};
  }
  tcp::endpoint endpoint(address, static_cast<uint16_t>(config.port));
  auto& acceptor = impl_->acceptor;
  auto fail = [&](const char* what) {
    error_code ignored;
    acceptor.close(ignored);
    return Error{std::string("Could not ") + what + " " + address.to_string() + ":" +
                 std::to_string(config.port) + ": " + ec.message() + "."};
  };
  acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("open a socket for");
  acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (ec) return fail("configure");
  acceptor.bind(endpoint, ec);
  if (ec) return fail("bind");
  acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen on");
  impl_->port = acceptor.local_endpoint(ec).port();

  impl_->started = true;
  impl_->accept();
  impl_->work.emplace(impl_->shared->io.get_executor());
  impl_->threads.reserve(static_cast<size_t>(config.num_io_threads));
  for (int i = 0; i < config.num_io_threads; ++i) {
    impl_->threads.emplace_back([shared = impl_->shared] { shared->io.run(); });
  }
  return {};
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::stop_accepting() {
  std::lock_guard lifecycle(impl_->lifecycle_mutex);
  if (!impl_->started || impl_->stopped) return;
  Impl* impl = impl_.get();
  impl->shared->draining = true;
  impl->on_accept_strand([impl] {
    impl->close_acceptor();
    for (auto& connection : impl->live_connections()) {
      net::post(connection->strand(), [connection] { connection->close_if_idle(); });
    }
  });
}

int64_t HttpServer::in_flight() const { return impl_->shared->in_flight.load(); }

int64_t HttpServer::open_connections() const { return impl_->shared->open_connections.load(); }

void HttpServer::stop() {
  std::lock_guard lifecycle(impl_->lifecycle_mutex);
  if (!impl_->started || impl_->stopped) return;
  LM_CHECK_MSG(!impl_->shared->io.get_executor().running_in_this_thread(),
               "HttpServer::stop() called from an I/O thread would join itself");
  impl_->stopped = true;
  Impl* impl = impl_.get();
  impl->shared->draining = true;
  net::post(impl->accept_strand, [impl] {
    impl->close_acceptor();
    for (auto& connection : impl->live_connections()) {
      net::post(connection->strand(), [connection] { connection->close_now(); });
    }
  });
  // With every socket closed the threads run out of work and return.
  impl->work.reset();
  for (std::thread& thread : impl->threads) thread.join();
  impl->threads.clear();
  {
    std::lock_guard lock(impl->shared->mutex);
    impl->shared->stopped = true;
  }
  // Runs whatever other threads posted while the I/O threads were winding down.
  impl->shared->io.restart();
  impl->shared->io.run();
}

}  // namespace lm
