#include "server/tracing/otlp_http_sender.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <charconv>
#include <mutex>

namespace lm {
namespace {

constexpr std::string_view kTracesPath = "/v1/traces";
// A batch the collector has not taken by then is counted as failed (the queue keeps filling).
constexpr long kTimeoutSeconds = 10;
constexpr long kConnectTimeoutSeconds = 5;
constexpr size_t kMaxErrorBodyBytes = 200;

size_t keep_start_of_body(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  const size_t n = size * count;
  if (body->size() < kMaxErrorBodyBytes)
    body->append(data, std::min(n, kMaxErrorBodyBytes - body->size()));
  return n;
}

}  // namespace

std::string otlp_traces_url(std::string_view endpoint) {
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.remove_suffix(1);
  std::string url(endpoint);
  if (!endpoint.ends_with(kTracesPath)) url += kTracesPath;
  return url;
}

std::optional<int> url_port(std::string_view url) {
  if (const size_t scheme = url.find("://"); scheme != std::string_view::npos)
    url.remove_prefix(scheme + 3);
  url = url.substr(0, url.find_first_of("/?#"));
  if (const size_t at = url.rfind('@'); at != std::string_view::npos) url.remove_prefix(at + 1);
  if (!url.empty() && url.front() == '[') {  // [IPv6]:port
    const size_t close = url.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    url.remove_prefix(close + 1);
    if (url.empty()) return std::nullopt;
    if (url.front() != ':') return std::nullopt;
  } else {
    const size_t colon = url.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    url.remove_prefix(colon);
  }
  url.remove_prefix(1);  // the ':'
  int port = 0;
  auto [end, error] = std::from_chars(url.data(), url.data() + url.size(), port);
  if (error != std::errc() || end != url.data() + url.size() || port <= 0 || port > 65535)
    return std::nullopt;
  return port;
}

OtlpHttpSender::OtlpHttpSender(std::string url) : url_(std::move(url)) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
  headers_ = curl_slist_append(nullptr, "Content-Type: application/json");
}

OtlpHttpSender::~OtlpHttpSender() {
  curl_slist_free_all(static_cast<curl_slist*>(headers_));
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Status OtlpHttpSender::send(const std::string& body) {
  if (curl_ == nullptr) return Error{"libcurl could not be initialised"};
  CURL* curl = static_cast<CURL*>(curl_);
  std::string answer;
  curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(headers_));
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, kTimeoutSeconds);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, kConnectTimeoutSeconds);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_start_of_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
  const CURLcode code = curl_easy_perform(curl);
  if (code != CURLE_OK) return Error{fmt::format("POST {}: {}", url_, curl_easy_strerror(code))};
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300)
    return Error{fmt::format("POST {}: HTTP {} {}", url_, status, answer)};
  return {};
}

}  // namespace lm
