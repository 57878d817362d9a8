#include "hub/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

namespace lm::hub {
namespace {

constexpr size_t kMaxBodyInMemory = 64u << 20;  // model info of huge repos stays well below
constexpr size_t kMaxErrorBody = 64u << 10;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::optional<std::string> HttpResponse::header(std::string_view lowercase_name) const {
  auto it = headers.find(std::string(lowercase_name));
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

struct HttpClient::Request {
  std::string url;
  bool head = false;
  bool follow = true;
  uint64_t offset = 0;
  const BodySink* sink = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  HttpResponse response;
  long current_status = 0;
  bool sink_refused = false;
};

HttpClient::HttpClient(const HubOptions& options) : options_(options) {
  global_init();
  curl_ = curl_easy_init();
  LM_CHECK(curl_ != nullptr);
}

HttpClient::~HttpClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

Result<HttpResponse> HttpClient::get(const std::string& url) {
  Request r;
  r.url = url;
  return perform(r);
}

Result<HttpResponse> HttpClient::head(const std::string& url) {
  Request r;
  r.url = url;
  r.head = true;
  r.follow = false;
  return perform(r);
}

Result<HttpResponse> HttpClient::download(const std::string& url, uint64_t offset,
                                          const BodySink& sink, const std::atomic<bool>* cancel) {
  Request r;
  r.url = url;
  r.offset = offset;
  r.sink = &sink;
  r.cancel = cancel;
  return perform(r);
}

Result<HttpResponse> HttpClient::perform(Request& request) {
  CURL* curl = static_cast<CURL*>(curl_);
  curl_easy_reset(curl);

  // Each response of a redirect chain starts with its status line; keep the last one's headers.
  auto on_header = +[](char* data, size_t size, size_t count, void* user) -> size_t {
    auto* r = static_cast<Request*>(user);
    const std::string_view line(data, size * count);
    if (line.rfind("HTTP/", 0) == 0) {
      r->response.headers.clear();
      const size_t space = line.find(' ');
      if (space != std::string_view::npos)
        r->current_status =
            std::strtol(std::string(line.substr(space + 1, 3)).c_str(), nullptr, 10);
      return size * count;
    }
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      std::string name(line.substr(0, colon));
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      r->response.headers[name] = trim(line.substr(colon + 1));
    }
    return size * count;
  };
  auto on_body = +[](char* data, size_t size, size_t count, void* user) -> size_t {
    auto* r = static_cast<Request*>(user);
    const size_t n = size * count;
    const bool success = r->current_status >= 200 && r->current_status < 300;
    if (r->sink != nullptr && success) {
      if (!(*r->sink)(r->current_status, data, n)) {
        r->sink_refused = true;
        return 0;  // aborts with CURLE_WRITE_ERROR
      }
      return n;
    }
    const size_t cap = r->sink != nullptr ? kMaxErrorBody : kMaxBodyInMemory;
    if (r->response.body.size() + n > cap) return 0;
    r->response.body.append(data, n);
    return n;
  };
  auto on_progress = +[](void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> int {
    auto* r = static_cast<Request*>(user);
    return r->cancel != nullptr && r->cancel->load() ? 1 : 0;
  };

  curl_slist* headers = nullptr;
  if (options_.token)
    headers = curl_slist_append(headers, ("Authorization: Bearer " + *options_.token).c_str());
  // No compression: sizes and byte ranges must be those of the file itself.
  headers = curl_slist_append(headers, "Accept-Encoding: identity");
  if (request.offset > 0) {
    headers = curl_slist_append(headers,
                                ("Range: bytes=" + std::to_string(request.offset) + "-").c_str());
  }
  char error_text[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "text-generation-launcher (lm; hf_hub-compatible)");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.stall_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, request.follow ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_NOBODY, request.head ? 1L : 0L);
  if (request.sink == nullptr) curl_easy_setopt(curl, CURLOPT_TIMEOUT, 120L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &request);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &request);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &request);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);

  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  request.response.status = status;
  if (code != CURLE_OK) {
    if (request.sink_refused) return Error{"the download of " + request.url + " was stopped"};
    if (code == CURLE_ABORTED_BY_CALLBACK)
      return Error{"the download of " + request.url + " was cancelled"};
    std::string text = error_text[0] != '\0' ? error_text : curl_easy_strerror(code);
    return Error{"network error for " + request.url + ": " + text};
  }
  return std::move(request.response);
}

}  // namespace lm::hub
