#include "server/routed_response.h"

#include "server/wire/api_error.h"

namespace lm {

void RoutedResponse::respond(HttpResponse response) {
  std::lock_guard lock(mutex_);
  if (failed_) return;
  phase_ = Phase::kDone;
  response.headers.insert(response.headers.end(), cors_.begin(), cors_.end());
  inner_->respond(std::move(response));
}

void RoutedResponse::start_stream(int status, Headers headers) {
  std::lock_guard lock(mutex_);
  if (failed_) return;
  phase_ = Phase::kStreaming;
  headers.insert(headers.end(), cors_.begin(), cors_.end());
  inner_->start_stream(status, std::move(headers));
}

void RoutedResponse::write(std::string chunk) {
  std::lock_guard lock(mutex_);
  if (!failed_) inner_->write(std::move(chunk));
}

void RoutedResponse::finish() {
  std::lock_guard lock(mutex_);
  if (failed_) return;
  phase_ = Phase::kDone;
  inner_->finish();
}

void RoutedResponse::fail() {
  std::lock_guard lock(mutex_);
  if (failed_) return;
  failed_ = true;
  if (phase_ == Phase::kIdle) {
    const ApiError e{500, "Internal server error", "internal"};
    HttpResponse response{e.status, {{"Content-Type", "application/json"}}, api_error_json(e)};
    response.headers.insert(response.headers.end(), cors_.begin(), cors_.end());
    inner_->respond(std::move(response));
  } else if (phase_ == Phase::kStreaming) {
    inner_->finish();
  }
}

}  // namespace lm
