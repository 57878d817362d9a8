// The response every route handler answers through: it adds the CORS headers to every answer,
// and lets the router end a request whose handler threw on a validation worker. fail() answers
// 500 in TGI's error shape (or ends a stream that started); every later call (an engine sink that
// outlived the handler) is then ignored, so nothing can follow fail()'s answer.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "server/transport/http_types.h"

namespace lm {

using Headers = std::vector<std::pair<std::string, std::string>>;

class RoutedResponse : public ResponseStream {
 public:
  RoutedResponse(Headers cors, std::shared_ptr<ResponseStream> inner)
      : inner_(std::move(inner)), cors_(std::move(cors)) {}

  void respond(HttpResponse response) override;
  void start_stream(int status, Headers headers) override;
  void write(std::string chunk) override;
  void finish() override;
  bool closed() const override { return inner_->closed(); }
  void on_close(std::function<void()> callback) override { inner_->on_close(std::move(callback)); }

  void fail();

 private:
  enum class Phase { kIdle, kStreaming, kDone };
  std::shared_ptr<ResponseStream> inner_;
  const Headers cors_;
  // Held across each inner call: a late answer cannot interleave with fail()'s.
  std::mutex mutex_;
  Phase phase_ = Phase::kIdle;  // guarded by mutex_, as is failed_
  bool failed_ = false;
};

}  // namespace lm
