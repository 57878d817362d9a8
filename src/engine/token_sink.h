// TokenSink: where the engine delivers one request's tokens. The server implements it (text,
// stop sequences, SSE); tests implement it to record. Called only on the engine thread, so an
// implementation must hand work off rather than block.
#pragma once

#include <optional>
#include <string>

#include "engine/finish_reason.h"
#include "engine/sampled_token.h"

namespace lm {

struct TokenEvent {
  SampleResult token;
  // Set on the request's last token: length or EOS (the engine decides those).
  std::optional<FinishReason> finish_reason;
};

class TokenSink {
 public:
  virtual ~TokenSink() = default;
  // One generated token. Return false to end the request here (a stop sequence matched); the
  // engine then frees its resources before the next step and sends nothing more.
  virtual bool on_token(const TokenEvent& event) = 0;
  // The request failed inside the engine (e.g. the executor failed); nothing follows.
  virtual void on_error(const std::string& message) = 0;
  // Polled between steps: true when the client is gone, so the request is dropped and its
  // resources freed without another call.
  virtual bool cancelled() const = 0;
  // The request left the queue for the running batch (again after a preemption), before that
  // step computes: where TGI's queue time ends and its inference time starts.
  virtual void on_scheduled() {}
};

}  // namespace lm
