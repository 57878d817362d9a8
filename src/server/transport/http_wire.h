// Byte-level HTTP/1.1 response framing (status line, headers, chunks), kept free of Beast so the
// transport in http_server.cc stays small and these rules can be tested on their own.
#pragma once

#include <cstddef>
#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lm::http_wire {

// How the body after a response head is delimited.
enum class BodyFraming {
  kContentLength,  // Content-Length: n (omitted for statuses that never carry a body)
  kChunked,        // Transfer-Encoding: chunked
  kUntilClose,     // HTTP/1.0 streaming: the body ends when the connection closes
};

inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// The status line and headers up to and including the blank line. The handler's own framing
// headers (Content-Length, Transfer-Encoding, Connection) are replaced by ours; headers whose
// name or value contains CR/LF are dropped so a handler cannot split the response.
std::string format_response_head(int status,
                                 const std::vector<std::pair<std::string, std::string>>& headers,
                                 BodyFraming framing, size_t content_length, bool keep_alive);

// One chunk of a chunked body: "<hex size>\r\n<data>\r\n". Empty data would end the body, so
// callers skip empty writes.
std::string format_chunk(std::string_view data);

// RFC 9110 reason phrase, or "Unknown" for codes outside the table.
std::string_view reason_phrase(int status);

// 1xx, 204 and 304 responses never carry a body.
bool status_has_body(int status);

// IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
std::string http_date(std::time_t when);

std::string to_lower_ascii(std::string_view text);

}  // namespace lm::http_wire
