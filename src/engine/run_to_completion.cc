#include "engine/run_to_completion.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace lm {
namespace {

// Collects one request's tokens and wakes the waiting caller when the request ends.
class WaitingSink final : public TokenSink {
 public:
  explicit WaitingSink(TokenCallback on_token) : on_token_(std::move(on_token)) {}

  bool on_token(const TokenEvent& event) override {
    const bool keep_going = !on_token_ || on_token_(event.token);
    std::lock_guard lock(mutex_);
    result_.tokens.push_back(event.token);
    // The engine's reason wins: a stop on the last token does not change why it ended.
    if (event.finish_reason) {
      finish(*event.finish_reason);
    } else if (!keep_going) {
      finish(FinishReason::kStopSequence);
    }
    return keep_going;
  }

  void on_error(const std::string& message) override {
    std::lock_guard lock(mutex_);
    error_ = message;
    done_ = true;
    done_cv_.notify_all();
  }

  bool cancelled() const override { return false; }

  Result<GenerationResult> wait() {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return done_; });
    if (error_) return Error{*error_};
    return std::move(result_);
  }

 private:
  void finish(FinishReason reason) {
    result_.finish_reason = reason;
    done_ = true;
    done_cv_.notify_all();
  }

  const TokenCallback on_token_;  // engine thread only
  std::mutex mutex_;              // guards everything below
  std::condition_variable done_cv_;
  bool done_ = false;
  GenerationResult result_;
  std::optional<std::string> error_;
};

}  // namespace

Result<GenerationResult> run_to_completion(Engine& engine, EngineRequest request,
                                           TokenCallback on_token) {
  auto sink = std::make_shared<WaitingSink>(std::move(on_token));
  LM_RETURN_IF_ERROR(engine.submit(std::move(request), sink));
  return sink->wait();
}

}  // namespace lm
