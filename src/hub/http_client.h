// A small libcurl client for the Hub: JSON GETs, HEADs that do not follow redirects (to read the
// Hub's X-Linked-* headers) and streamed, resumable GETs that do (LFS files redirect to a CDN).
// Sends `Authorization: Bearer {token}` (curl drops it when a redirect leaves the host).
// One client per thread; a failed transfer is an Error holding curl's text.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "hub/hub_options.h"

namespace lm::hub {

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // the final response's, names in lowercase
  std::string body;  // get()/head(): the body; download(): only for a non-2xx answer

  std::optional<std::string> header(std::string_view lowercase_name) const;
};

class HttpClient {
 public:
  explicit HttpClient(const HubOptions& options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  Result<HttpResponse> get(const std::string& url);   // follows redirects; body in memory
  Result<HttpResponse> head(const std::string& url);  // does not follow redirects

  // GET following redirects, from byte `offset` (a Range header when > 0). A 2xx body streams
  // to `sink`, which sees the final status first (206 = the range was honoured, 200 = the whole
  // file). The sink returning false, or `cancel` becoming true, aborts the transfer.
  using BodySink = std::function<bool(long status, const char* data, size_t size)>;
  Result<HttpResponse> download(const std::string& url, uint64_t offset, const BodySink& sink,
                                const std::atomic<bool>* cancel = nullptr);

 private:
  struct Request;
  Result<HttpResponse> perform(Request& request);

  HubOptions options_;
  void* curl_ = nullptr;  // CURL*, kept out of this header
};

}  // namespace lm::hub
