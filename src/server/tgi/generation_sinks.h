// The TokenSinks of the generate routes. StreamSink writes one SSE event per token;
// CollectingSink gathers a whole sequence and hands it to a callback (the JSON response, or the
// best_of chooser). Both run on the engine thread and only post bytes to the ResponseStream.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "engine/token_sink.h"
#include "server/state/server_state.h"
#include "server/text/sequence_text.h"
#include "server/tgi/generate_response.h"
#include "server/transport/http_types.h"
#include "server/wire/api_error.h"

namespace lm {

using Clock = std::chrono::steady_clock;

// Timestamps of one request, for the x-*-time headers and the duration metrics.
struct RequestClock {
  Clock::time_point start;     // request received
  Clock::time_point enqueued;  // submitted to the engine
  // Joined the running batch (TokenSink::on_scheduled): the queue time ends, inference starts.
  std::optional<Clock::time_point> scheduled;
};

// Records TGI's per-request success metrics.
void record_success(Metrics& metrics, const RequestClock& clock, uint32_t generated_tokens);
// The x-*-time headers' split of a request answered now: validation until enqueued, queue until
// it joined the running batch, inference since.
GenerateTimings request_timings(const RequestClock& clock);

class StreamSink : public TokenSink {
 public:
  StreamSink(ServerState& state, std::shared_ptr<ResponseStream> response, SequenceText text,
             RequestClock clock, bool details, std::optional<uint64_t> seed,
             std::shared_ptr<ConcurrencyPermit> permit);
  ~StreamSink() override;
  bool on_token(const TokenEvent& event) override;
  void on_error(const std::string& message) override;
  bool cancelled() const override { return response_->closed(); }
  void on_scheduled() override;

 private:
  ServerState& state_;
  std::shared_ptr<ResponseStream> response_;
  SequenceText text_;
  RequestClock clock_;
  bool details_;
  std::optional<uint64_t> seed_;
  std::shared_ptr<ConcurrencyPermit> permit_;
  bool done_ = false;
};

struct SequenceOutcome {
  std::optional<GeneratedSequence> sequence;  // null on error
  std::optional<ApiError> error;
  double mean_logprob = 0;
  uint32_t input_length = 0;
  std::optional<Clock::time_point> scheduled;  // when it joined the running batch
};

class CollectingSink : public TokenSink {
 public:
  using Callback = std::function<void(SequenceOutcome)>;
  CollectingSink(ServerState& state, std::shared_ptr<ResponseStream> response, SequenceText text,
                 std::optional<uint64_t> seed, Callback on_done);
  ~CollectingSink() override;
  bool on_token(const TokenEvent& event) override;
  void on_error(const std::string& message) override;
  bool cancelled() const override { return response_->closed(); }
  void on_scheduled() override;

 private:
  ServerState& state_;
  std::shared_ptr<ResponseStream> response_;
  SequenceText text_;
  std::optional<uint64_t> seed_;
  Callback on_done_;
  std::optional<Clock::time_point> scheduled_;
  bool done_ = false;
};

}  // namespace lm
