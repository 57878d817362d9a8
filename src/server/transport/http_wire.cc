// Response framing for the HTTP transport: status line, header block, chunk encoding.
#include "server/transport/http_wire.h"

#include <cstdio>

namespace lm::http_wire {
namespace {

bool is_framing_header(std::string_view lower_name) {
  return lower_name == "content-length" || lower_name == "transfer-encoding" ||
         lower_name == "connection";
}

bool has_line_break(std::string_view text) {
  return text.find_first_of("\r\n") != std::string_view::npos;
}

}  // namespace

std::string format_response_head(int status,
                                 const std::vector<std::pair<std::string, std::string>>& headers,
                                 BodyFraming framing, size_t content_length, bool keep_alive) {
  std::string out;
  out.reserve(128 + headers.size() * 48);
  out += "HTTP/1.1 ";
  out += std::to_string(status);
  out += ' ';
  out += reason_phrase(status);
  out += "\r\n";
  for (const auto& [name, value] : headers) {
    if (name.empty() || has_line_break(name) || has_line_break(value)) continue;
    if (is_framing_header(to_lower_ascii(name))) continue;
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  out += "Date: ";
  out += http_date(std::time(nullptr));
  out += "\r\n";
  switch (framing) {
    case BodyFraming::kContentLength:
      if (status_has_body(status)) {
        out += "Content-Length: ";
        out += std::to_string(content_length);
        out += "\r\n";
      }
      break;
    case BodyFraming::kChunked:
      out += "Transfer-Encoding: chunked\r\n";
      break;
    case BodyFraming::kUntilClose:
      break;
  }
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  out += "\r\n";
  return out;
}

std::string format_chunk(std::string_view data) {
  char size[32];
  int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string out;
  out.reserve(static_cast<size_t>(n) + data.size() + 2);
  out.append(size, static_cast<size_t>(n));
  out.append(data);
  out += "\r\n";
  return out;
}

std::string_view reason_phrase(int status) {
  static constexpr std::pair<int, std::string_view> kPhrases[] = {
      {100, "Continue"},
      {101, "Switching Protocols"},
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {204, "No Content"},
      {206, "Partial Content"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {303, "See Other"},
      {304, "Not Modified"},
      {307, "Temporary Redirect"},
      {308, "Permanent Redirect"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {406, "Not Acceptable"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {410, "Gone"},
      {411, "Length Required"},
      {413, "Payload Too Large"},
      {414, "URI Too Long"},
      {415, "Unsupported Media Type"},
      {422, "Unprocessable Entity"},
      {424, "Failed Dependency"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {502, "Bad Gateway"},
      {503, "Service Unavailable"},
      {504, "Gateway Timeout"},
  };
  for (const auto& [code, phrase] : kPhrases) {
    if (code == status) return phrase;
  }
  return "Unknown";
}

bool status_has_body(int status) { return !(status < 200 || status == 204 || status == 304); }

std::string http_date(std::time_t when) {
  // Spelled out rather than strftime's %a/%b, which follow the process locale.
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::tm tm{};
  gmtime_r(&when, &tm);
  char text[64];
  int n = std::snprintf(text, sizeof(text), "%s, %02d %s %04d %02d:%02d:%02d GMT",
                        kDays[tm.tm_wday % 7], tm.tm_mday, kMonths[tm.tm_mon % 12],
                        tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return std::string(text, static_cast<size_t>(n));
}

std::string to_lower_ascii(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace lm::http_wire
