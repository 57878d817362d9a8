// A TokenSink that collects a request's tokens for the runtime tests, and waits for its end.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/run_to_completion.h"
#include "engine/token_sink.h"

namespace lm::testing_helpers {

class CollectingSink : public TokenSink {
 public:
  bool on_token(const TokenEvent& event) override {
    std::lock_guard lock(mutex_);
    tokens_.push_back(event.token);
    if (event.finish_reason) {
      finish_reason_ = event.finish_reason;
      done_ = true;
      cv_.notify_all();
    }
    return true;
  }
  void on_error(const std::string& message) override {
    std::lock_guard lock(mutex_);
    error_ = message;
    done_ = true;
    cv_.notify_all();
  }
  bool cancelled() const override { return false; }

  // The finished result, or an error message as the failure.
  GenerationResult wait(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock lock(mutex_);
    EXPECT_TRUE(cv_.wait_for(lock, timeout, [&] { return done_; }));
    EXPECT_EQ(error_, "");
    return GenerationResult{tokens_, finish_reason_.value_or(FinishReason::kStopSequence)};
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<SampleResult> tokens_;
  std::optional<FinishReason> finish_reason_;
  std::string error_;
};

}  // namespace lm::testing_helpers
